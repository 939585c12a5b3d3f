// SentencePiece tokenizer as Parakeet uses it (ids 0..V-1, blank = V); mirrors tokenizer.py.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "errors.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace parakeet {

class Tokenizer {
 public:
  // Throws TokenizerError for a missing file or one that is not a SentencePiece model.
  explicit Tokenizer(const std::string& path);
  ~Tokenizer();

  int vocab_size() const;
  // Throws TokenizerError when the tokenizer's size differs from the model's vocabulary.
  void check_vocab(int64_t model_vocab_size) const;
  // Hex SHA-256 of the serialized SentencePiece model (what the .pte's tokenizer_sha256 holds).
  std::string fingerprint() const;
  // Throws TokenizerError unless fingerprint() == expected; an empty `expected` (a .pte exported before the
  // fingerprint existed) only warns: the size check is then all there is. `model_name` is for the messages.
  void check_fingerprint(const std::string& expected, const std::string& model_name, const WarningSink& warn) const;
  std::string piece(int id) const;  // with the word-boundary marker '▁' kept
  std::string decode(const std::vector<int>& ids) const;
  std::string decode_pieces(const std::vector<std::string>& pieces) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace parakeet
