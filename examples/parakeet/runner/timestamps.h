// Text, token, word and segment timestamps from decoded TDT tokens: a port of decoding/timestamps.py (NeMo's
// rules for SentencePiece models with the default decoding config). Offsets are encoder frames, start/end seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tdt_greedy.h"

namespace parakeet {

struct Span {
  std::string text;
  int64_t start_offset = 0;
  int64_t end_offset = 0;
  double start = 0.0;
  double end = 0.0;
  std::optional<int64_t> id;  // token spans only
};

// Each punctuation character (as UTF-8) found in the vocabulary's ordinary pieces (NeMo's
// extract_punctuation_from_vocab: pieces like <unk>, [..], or starting with '▁' or '##' are skipped).
using Punctuation = std::set<std::string>;
Punctuation punctuation_of_vocab(const std::vector<std::string>& pieces);

// Removes one whitespace character before each punctuation mark of the vocabulary (NeMo's hypothesis text).
std::string transcript_text(const std::string& decoded, const Punctuation& punctuation);

// Token spans; a punctuation token after the first is moved onto the previous token's end.
std::vector<Span> token_spans(const std::vector<DecodedToken>& tokens, const std::vector<std::string>& texts,
                              const Punctuation& punctuation);

using DecodePiecesFn = std::function<std::string(const std::vector<std::string>&)>;
// Words from token spans (NeMo's get_words_offsets for BPE tokenizers).
std::vector<Span> word_spans(std::vector<Span> spans, const std::vector<std::string>& pieces,
                             const DecodePiecesFn& decode_pieces, const Punctuation& punctuation);

// Segments closed by a word ending in . ? or ! (NeMo's get_segment_offsets).
std::vector<Span> segment_spans(const std::vector<Span>& words);

// start/end = offset x window stride x subsampling factor, in NeMo's order of operations.
void set_seconds(std::vector<Span>& spans, double window_stride, int64_t subsampling_factor);

}  // namespace parakeet
