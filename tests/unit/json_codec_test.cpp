// SPDX-License-Identifier: BSL-1.0
// json::codec reads exactly what a JSON value says and refuses the rest: every refusal here is a
// value some JSON library would have read as something else (truncated, rounded, wrapped, the
// first or the last of two keys, a default for a missing field).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <commit_order/adapters/json.hpp>

namespace json = commit_order::json;

namespace {

struct payment final {
  std::int64_t id = 0;
  std::string customer;
  std::int64_t cents = 0;
  bool refund = false;
  double rate = 0;
  std::optional<std::int32_t> branch;
  std::uint16_t currency = 0;
  float weight = 0;
  friend bool operator==(const payment&, const payment&) = default;
};

using payment_json = json::codec<
    payment,
    json::fields<json::field<"id", &payment::id>, json::field<"customer", &payment::customer>,
                 json::field<"cents", &payment::cents>, json::field<"refund", &payment::refund>,
                 json::field<"rate", &payment::rate>, json::field<"branch", &payment::branch>,
                 json::field<"currency", &payment::currency>,
                 json::field<"weight", &payment::weight>>>;

std::span<const std::byte> bytes(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

std::string text_of(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

/// A valid payment's JSON with `field` replaced by `value` ("" removes it).
std::string with(std::string_view field, std::string_view value) {
  const std::vector<std::pair<std::string, std::string>> fields{
      {"id", "7"},      {"customer", "\"ada\""}, {"cents", "1250"},   {"refund", "false"},
      {"rate", "0.25"}, {"branch", "3"},         {"currency", "978"}, {"weight", "1.5"}};
  std::string s = "{";
  for (const auto& [name, v] : fields) {
    const std::string_view shown = name == field ? value : std::string_view(v);
    if (name == field && value.empty())
      continue;
    if (s.size() > 1)
      s += ',';
    s += '"' + name + "\":" + std::string(shown);
  }
  return s + '}';
}

payment decode(const std::string& text) {
  return payment_json::decode(bytes(text));
}

template <class C>
concept encodes = requires(const payment& e, std::vector<std::byte>& out) {
  C::encode(e, out);
};

}  // namespace

TEST_CASE("json::codec: a value round-trips, fields in their order") {
  const payment p{42,  "Ada Lovelace \"the first\" \xc3\xa9", -1250, true, 0.1, std::nullopt, 978,
                  0.1F};
  std::vector<std::byte> out;
  payment_json::encode(p, out);
  const std::string text = text_of(out);
  CHECK(text.rfind("{\"id\":42,\"customer\":", 0) == 0);
  CHECK(text.find("\"branch\":null") != std::string::npos);
  CHECK(payment_json::decode(out) == p);

  const payment max{std::numeric_limits<std::int64_t>::max(),
                    "",
                    std::numeric_limits<std::int64_t>::min(),
                    false,
                    1e300,
                    std::int32_t{-5},
                    65535,
                    std::numeric_limits<float>::max()};
  out.clear();
  payment_json::encode(max, out);
  CHECK(payment_json::decode(out) == max);
}

TEST_CASE("json::codec: an integer field takes a JSON integer in range, nothing else") {
  CHECK(decode(with("cents", "-9223372036854775808")).cents ==
        std::numeric_limits<std::int64_t>::min());
  for (const char* bad : {"12.5", "12.0", "1e3", "\"12\"", "true", "null", "[1]",
                          "9223372036854775808", "18446744073709551616"}) {
    INFO(bad);
    CHECK_THROWS_AS(decode(with("cents", bad)), std::invalid_argument);
  }
  CHECK(decode(with("currency", "65535")).currency == 65535);
  for (const char* bad : {"65536", "-1", "1.0"}) {
    INFO(bad);
    CHECK_THROWS_WITH_AS(decode(with("currency", bad)),
                         doctest::Contains("JSON field \"currency\""), std::invalid_argument);
  }
  CHECK_THROWS_WITH_AS(decode(with("cents", "12.5")),
                       "JSON field \"cents\" is 12.5, not an integer", std::invalid_argument);
  CHECK_THROWS_WITH_AS(decode(with("branch", "2147483648")),
                       "JSON field \"branch\" is 2147483648, out of range", std::invalid_argument);
}

TEST_CASE("json::codec: a floating-point field refuses what it would round or overflow") {
  CHECK(decode(with("rate", "9007199254740992")).rate == 9007199254740992.0);
  CHECK(decode(with("rate", "-9007199254740992")).rate == -9007199254740992.0);
  CHECK(decode(with("rate", "18446744073709549568")).rate == 18446744073709549568.0);
  CHECK_THROWS_WITH_AS(decode(with("rate", "9007199254740993")), doctest::Contains("would round"),
                       std::invalid_argument);
  CHECK_THROWS_AS(decode(with("rate", "18446744073709551615")), std::invalid_argument);
  CHECK_THROWS_AS(decode(with("rate", "1e400")), std::invalid_argument);
  CHECK_THROWS_WITH_AS(decode(with("weight", "1e39")), doctest::Contains("out of range"),
                       std::invalid_argument);
  CHECK_THROWS_AS(decode(with("weight", "16777217")), std::invalid_argument);
  CHECK_THROWS_AS(decode(with("rate", "\"0.25\"")), std::invalid_argument);

  payment nan{};
  nan.rate = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::byte> out;
  CHECK_THROWS_WITH_AS(payment_json::encode(nan, out),
                       "JSON field \"rate\" is not finite, and JSON has no form for it",
                       std::invalid_argument);
  nan.rate = 0;
  nan.weight = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(payment_json::encode(nan, out), std::invalid_argument);
}

TEST_CASE("json::codec: presence, duplicates, and what surrounds the object") {
  CHECK_THROWS_WITH_AS(decode(with("cents", "")), "JSON field \"cents\" is missing",
                       std::invalid_argument);
  CHECK_FALSE(decode(with("branch", "")).branch.has_value());
  CHECK_FALSE(decode(with("branch", "null")).branch.has_value());
  CHECK(decode(with("branch", "-4")).branch == -4);
  CHECK_THROWS_AS(decode(with("branch", "\"4\"")), std::invalid_argument);
  CHECK_THROWS_AS(decode(with("refund", "0")), std::invalid_argument);
  CHECK_THROWS_AS(decode(with("customer", "42")), std::invalid_argument);

  // A key twice: which one a reader takes differs between libraries, so neither is taken.
  std::string twice = with("cents", "1");
  twice.insert(1, "\"cents\":2,");
  CHECK_THROWS_WITH_AS(decode(twice), "JSON key \"cents\" appears twice in one object",
                       std::invalid_argument);
  std::string nested = with("id", "7");
  nested.insert(1, "\"meta\":{\"a\":1,\"a\":2},");
  CHECK_THROWS_AS(decode(nested), std::invalid_argument);

  // Keys no field names are ignored: a producer may add fields first.
  std::string extra = with("id", "7");
  extra.insert(1, "\"added_later\":{\"x\":[1,2]},");
  CHECK(decode(extra).id == 7);

  CHECK_THROWS_WITH_AS(decode("[1,2]"), "the JSON value is [1,2], not an object",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(decode(with("id", "7") + " {}"), doctest::Contains("not JSON"),
                       std::invalid_argument);
  CHECK_THROWS_AS(decode(""), std::invalid_argument);
  CHECK_THROWS_AS(decode(with("customer", "\"\xff\xfe\"")), std::invalid_argument);
  CHECK_THROWS_AS(decode(with("id", "7").substr(0, 10)), std::invalid_argument);
}

// Found by review: what nlohmann/json's value no longer shows, caught on the text.
TEST_CASE("json::codec: a NUL byte, integers beyond 64 bits and underflow are refused") {
  // The parser stops at a NUL byte: what follows would be ignored.
  std::string nul = with("id", "1");
  nul += '\0';
  nul += with("id", "2") + "garbage";
  CHECK_THROWS_WITH_AS(decode(nul), "not JSON: a NUL byte in the text", std::invalid_argument);
  // An integer beyond 64 bits becomes a rounded double in the parser.
  for (const char* big :
       {"18446744073709551617", "-9223372036854775809", "100000000000000000000000000001"}) {
    INFO(big);
    CHECK_THROWS_WITH_AS(decode(with("rate", big)), doctest::Contains("is beyond 64 bits"),
                         std::invalid_argument);
    CHECK_THROWS_AS(decode(with("cents", big)), std::invalid_argument);
  }
  // Too small for the type: it would read as 0.
  CHECK_THROWS_WITH_AS(decode(with("rate", "1e-400")), doctest::Contains("too small"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(decode(with("weight", "1e-50")), doctest::Contains("too small"),
                       std::invalid_argument);
  CHECK(decode(with("rate", "0e5")).rate == 0);
  CHECK(decode(with("rate", "0.000")).rate == 0);
  CHECK(decode(with("rate", "1e-300")).rate == 1e-300);
}

TEST_CASE("json::codec: an event inside Kafka Connect's envelope, at member<\"payload\">") {
  using enveloped = json::codec<
      payment, json::fields<json::field<"id", &payment::id>, json::field<"cents", &payment::cents>>,
      json::member<"payload">>;
  payment p;
  p.id = 5;
  p.cents = 700;
  CHECK(enveloped::decode(bytes(R"({"schema":{"type":"struct"},"payload":{"id":5,"cents":700}})"))
            .cents == 700);
  CHECK_THROWS_WITH_AS(enveloped::decode(bytes(R"({"id":5,"cents":700})")),
                       "the JSON value has no object at key \"payload\"", std::invalid_argument);
  CHECK_THROWS_AS(enveloped::decode(bytes(R"({"payload":null})")), std::invalid_argument);
  CHECK_THROWS_AS(enveloped::decode(bytes(R"({"payload":{"id":5,"cents":7.5}})")),
                  std::invalid_argument);
  static_assert(!encodes<enveloped>, "an envelope's schema is not written: no encode");
  static_assert(encodes<payment_json>);
}
