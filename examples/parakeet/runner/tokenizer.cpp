#include "tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "errors.h"

namespace parakeet {

Tokenizer::Tokenizer(const std::string& path) : path_(path), sp_(new sentencepiece::SentencePieceProcessor()) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw TokenizerError("tokenizer file not found: " + path +
                         ". Pass the tokenizer.model written by parakeet-export next to the .pte.");
  }
  const auto status = sp_->Load(path);
  if (!status.ok()) {
    throw TokenizerError(path + " is not a SentencePiece model: " + status.ToString());
  }
}

Tokenizer::~Tokenizer() = default;

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

void Tokenizer::check_vocab(int64_t model_vocab_size) const {
  if (vocab_size() != model_vocab_size) {
    throw TokenizerError("tokenizer " + path_ + " has " + std::to_string(vocab_size()) +
                         " tokens but the model's vocabulary has " + std::to_string(model_vocab_size) +
                         "; use the tokenizer.model exported next to this .pte");
  }
}

std::string Tokenizer::piece(int id) const { return sp_->IdToPiece(id); }

std::string Tokenizer::decode(const std::vector<int>& ids) const { return sp_->DecodeIds(ids); }

std::string Tokenizer::decode_pieces(const std::vector<std::string>& pieces) const {
  return sp_->DecodePieces(pieces);
}

}  // namespace parakeet
