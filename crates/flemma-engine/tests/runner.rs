//! One test binary for the engine: data-driven cycle tests, jobs, and properties.

mod common;
mod crlf;
mod cycle;
mod jobs;
mod properties;
mod provenance;
mod session;
mod session_properties;
mod session_world;
