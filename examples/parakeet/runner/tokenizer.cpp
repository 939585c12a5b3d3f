#include "tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "errors.h"
#include "sha256.h"

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

std::string Tokenizer::fingerprint() const { return sha256_hex(sp_->serialized_model_proto()); }

void Tokenizer::check_fingerprint(const std::string& expected, const std::string& model_name,
                                  const WarningSink& warn) const {
  if (expected.empty()) {
    if (warn) {
      warn(model_name + " carries no tokenizer fingerprint (exported by an older parakeet-export), so " + path_ +
           " is checked by size only; re-export the model to have it checked fully");
    }
    return;
  }
  const std::string actual = fingerprint();
  if (actual != expected) {
    throw TokenizerError("tokenizer " + path_ + " is not the one " + model_name +
                         " was exported with (SentencePiece model SHA-256 " + actual.substr(0, 12) + "..., expected " +
                         expected.substr(0, 12) +
                         "...): its ids would decode to the wrong text. Use the "
                         "tokenizer.model exported next to this .pte, or pass --ignore_tokenizer_fingerprint if you "
                         "know they match");
  }
}

std::string Tokenizer::piece(int id) const { return sp_->IdToPiece(id); }

std::string Tokenizer::decode(const std::vector<int>& ids) const { return sp_->DecodeIds(ids); }

std::string Tokenizer::decode_pieces(const std::vector<std::string>& pieces) const { return sp_->DecodePieces(pieces); }

}  // namespace parakeet
