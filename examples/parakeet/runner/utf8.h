// The few Unicode facts the timestamp rules need, answered exactly as Python's unicodedata / re answer them
// (tables generated from Python by tools/gen_unicode_tables.py), so punctuation sets and text match the Python
// runner code point for code point.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parakeet::utf8 {

// Code points of a UTF-8 string; an invalid byte is taken as one code point of its own value so nothing is lost.
std::vector<char32_t> decode(const std::string& s);
std::string encode(char32_t cp);
std::string encode(const std::vector<char32_t>& cps);

bool is_punctuation(char32_t cp);  // unicodedata.category(ch).startswith("P")
bool is_space(char32_t cp);        // str.isspace(), which is what re's \s matches

}  // namespace parakeet::utf8
