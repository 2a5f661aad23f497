// SHA-256 against FIPS 180-2 appendix B, HMAC-SHA256 against RFC 4231.
#include "bootstrap/auth.hpp"
#include "bootstrap/sha256.hpp"

#include <gtest/gtest.h>

#include <string>

namespace chorus::auth {
namespace {

std::string hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (auto byte : digest) {
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1'000'000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string message;
  for (int i = 0; i < 1000; ++i) message += static_cast<char>(i * 7);
  // Split points around the 64-byte block and the 56-byte padding boundary.
  for (std::size_t split : {0, 1, 55, 56, 63, 64, 65, 127, 128, 999}) {
    Sha256 hash;
    hash.update(std::string_view(message).substr(0, split));
    hash.update(std::string_view(message).substr(split));
    EXPECT_EQ(hex(hash.finish()), hex(sha256(message))) << "split at " << split;
  }
}

TEST(HmacSha256, Rfc4231Vectors) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (char c = 1; c <= 25; ++c) key4 += c;
  EXPECT_EQ(hex(hmac_sha256(key4, std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  std::string long_key(131, '\xaa');
  EXPECT_EQ(hex(hmac_sha256(long_key, "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hex(hmac_sha256(long_key,
                            "This is a test using a larger than block-size key and a larger than "
                            "block-size data. The key needs to be hashed before being used by the "
                            "HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// The handshake allows an empty secret, and a message may be empty (reference: Python's hmac).
TEST(HmacSha256, EmptyKeyAndEmptyMessage) {
  EXPECT_EQ(hex(hmac_sha256("", "")),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  EXPECT_EQ(hex(hmac_sha256(std::string_view(), "chorus")),
            "2f6b6ea6fb1d7a5c87a98df44f8919ee3c6198438e3a586adb64685c42788489");
}

TEST(RandomSecret, Is64HexCharactersAndFresh) {
  std::string a = random_secret();
  std::string b = random_secret();
  ASSERT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace chorus::auth
