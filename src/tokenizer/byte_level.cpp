// The byte <-> code point tables of the byte-level alphabet.
#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace parallm {
namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8{};
  std::array<int16_t, 512> to_byte{};  // every code point of the alphabet is below 0x144
  Tables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_cp[static_cast<size_t>(b)] = cp;
      unicode::AppendUtf8(to_utf8[static_cast<size_t>(b)], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t b) { return GetTables().to_cp[b]; }

int CodePointToByte(char32_t cp) { return cp < 512 ? GetTables().to_byte[cp] : -1; }

std::string ByteLevelEncode(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_utf8[static_cast<uint8_t>(c)];
  return out;
}

}  // namespace parallm
