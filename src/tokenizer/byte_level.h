// GPT-2's byte-level alphabet: every byte is shown as one printable code point (space -> U+0120 'Ġ'), so byte
// strings become text a BPE vocabulary can hold.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace parallm {

// The code point byte `b` is written as.
char32_t ByteToCodePoint(uint8_t b);
// The byte a code point stands for, or -1 when it is not in the alphabet.
int CodePointToByte(char32_t cp);
// Maps each byte of `bytes` to its code point, as UTF-8.
std::string ByteLevelEncode(std::string_view bytes);

}  // namespace parallm
