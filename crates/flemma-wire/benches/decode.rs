//! Streaming overhead: generated ~10 MB streams fed in 16 KiB chunks, as from the network,
//! decoded into events (`decode/*`), and decoded then rendered into `.chat` text
//! (`decode_render/*`, the whole path from bytes to the text the writer appends).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flemma_wire::render::{ReplyOutcome, ReplyRenderer};
use flemma_wire::{ProviderKind, decoder};
use std::hint::black_box;

const TARGET: usize = 10 * 1024 * 1024;
const CHUNK: usize = 16 * 1024;

fn anthropic_stream() -> Vec<u8> {
    let mut out = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":16,\"output_tokens\":1}}}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    );
    let mut i = 0usize;
    while out.len() < TARGET / 4 {
        out.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":\"step {i}: consider the \\\"options\\\" carefully\\n\"}}}}\n\n"));
        i += 1;
    }
    out.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EtYDCkYICxgCKkAV\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n");
    out.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n");
    while out.len() < TARGET {
        out.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"text_delta\",\"text\":\"Olá, word {i} — some text\"}}      }}\n\n"));
        i += 1;
    }
    out.push_str("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":999}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    out.into_bytes()
}

fn responses_stream() -> Vec<u8> {
    let mut out = String::from(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]},\"sequence_number\":0}\n\n\
         event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"},\"output_index\":0,\"sequence_number\":1}\n\n",
    );
    let mut i = 2usize;
    while out.len() < TARGET {
        out.push_str(&format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"content_index\":0,\"delta\":\"Olá word {i} \",\"item_id\":\"msg_1\",\"logprobs\":[],\"obfuscation\":\"jiWK3iiUKcoCjS\",\"output_index\":0,\"sequence_number\":{i}}}\n\n"));
        i += 1;
    }
    out.push_str(&format!("event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{{\"input_tokens\":19,\"output_tokens\":118}}}},\"sequence_number\":{i}}}\n\n"));
    out.into_bytes()
}

fn decode_all(kind: ProviderKind, bytes: &[u8]) -> usize {
    let mut decoder = decoder(kind);
    let mut count = 0;
    for chunk in bytes.chunks(CHUNK) {
        count += decoder.feed(chunk).len();
    }
    count + decoder.finish().len()
}

fn decode_render_all(kind: ProviderKind, bytes: &[u8]) -> usize {
    let mut decoder = decoder(kind);
    let mut renderer = ReplyRenderer::for_provider(kind, true);
    let mut written = 0;
    for chunk in bytes.chunks(CHUNK) {
        for event in decoder.feed(chunk) {
            written += renderer.push(&event).map_or(0, |text| text.len());
        }
    }
    for event in decoder.finish() {
        written += renderer.push(&event).map_or(0, |text| text.len());
    }
    written + renderer.finish(ReplyOutcome::Completed).len()
}

/// A path from stream bytes to output, returning how much it produced.
type Path = fn(ProviderKind, &[u8]) -> usize;

fn bench(c: &mut Criterion) {
    let streams = [
        (
            "anthropic_10mb",
            ProviderKind::Anthropic,
            anthropic_stream(),
        ),
        (
            "openai_responses_10mb",
            ProviderKind::OpenAi,
            responses_stream(),
        ),
    ];
    let paths: [(&str, Path); 2] = [("decode", decode_all), ("decode_render", decode_render_all)];
    for (group_name, run) in paths {
        let mut group = c.benchmark_group(group_name);
        group.sample_size(10);
        for (name, kind, bytes) in &streams {
            group.throughput(Throughput::Bytes(bytes.len() as u64));
            group.bench_function(*name, |b| b.iter(|| run(*kind, black_box(bytes))));
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
