// SHA-256 (FIPS 180-4), for the tokenizer fingerprint the .pte carries (pte_format.py: tokenizer_fingerprint is
// hashlib.sha256 of the serialized SentencePiece model). Small and dependency-free; not for secrets.
#pragma once

#include <string>

namespace parakeet {

// Lower-case hex digest of `data` (64 characters), as Python's hashlib.sha256(data).hexdigest().
std::string sha256_hex(const std::string& data);

}  // namespace parakeet
