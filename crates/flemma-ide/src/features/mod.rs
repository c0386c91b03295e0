//! One module per editor feature (hover, definition, symbols, folding, inlay hints, completion,
//! code actions), each answering with plain data in byte offsets.
