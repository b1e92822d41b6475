// The prior's file (prior.hpp): a small JSON reader (RFC 8259: objects, arrays, strings with their escapes,
// numbers, true, false, null; no library of the harness reads JSON, and cudnn-frontend's nlohmann/json is
// absent from suites built without the frontend) and the lists it holds.
#include "benanza/prior.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace benanza {

namespace {

struct Value {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  std::string text;                                   // String
  std::vector<Value> items;                           // Array
  std::vector<std::pair<std::string, Value>> fields;  // Object, in file order
  const Value* get(const std::string& k) const {
    for (const auto& f : fields)
      if (f.first == k) return &f.second;
    return nullptr;
  }
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  Value document() {
    Value v = value(0);
    space();
    if (i_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("prior: not JSON (" + what + " at byte " + std::to_string(i_) + ")");
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    const std::string t(w);
    if (s_.compare(i_, t.size(), t) != 0) return false;
    i_ += t.size();
    return true;
  }
  static void utf8(unsigned cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v = v * 16 + (c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : (fail("bad \\u escape"), 0));
    }
    return v;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
            i_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8(cp, out);
          break;
        }
        default: fail("bad escape");
      }
    }
  }
  Value value(int depth) {
    if (depth > 64) fail("nesting too deep");
    space();
    if (i_ >= s_.size()) fail("unexpected end");
    Value v;
    const char c = s_[i_];
    if (c == '{') {
      v.type = Value::Object;
      ++i_;
      if (eat('}')) return v;
      do {
        space();
        std::string k = string();
        expect(':');
        v.fields.emplace_back(std::move(k), value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.type = Value::Array;
      ++i_;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.type = Value::String;
      v.text = string();
    } else if (word("true") || word("false")) {
      v.type = Value::Bool;
    } else if (word("null")) {
      v.type = Value::Null;
    } else {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      std::strtod(start, &end);
      if (end == start) fail("unexpected character");
      i_ += static_cast<std::size_t>(end - start);
      v.type = Value::Number;
    }
    return v;
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// [[call, algorithm], ...] into `out`; throws when the list has another shape.
void candidates(const Value* list, const std::string& job, const char* name, std::set<Prior::Candidate>& out) {
  if (!list) return;
  if (list->type != Value::Array) throw std::runtime_error("prior: job " + job + ": " + name + " is not a list");
  for (const Value& c : list->items) {
    if (c.type != Value::Array || c.items.size() != 2 || c.items[0].type != Value::String ||
        c.items[1].type != Value::String)
      throw std::runtime_error("prior: job " + job + ": an entry of " + name + " is not [call, algorithm]");
    out.emplace(c.items[0].text, c.items[1].text);
  }
}

}  // namespace

Prior Prior::parse(const std::string& text) {
  const Value doc = Reader(text).document();
  const Value* format = doc.get("format");
  const Value* version = doc.get("version");
  if (doc.type != Value::Object || !format || format->type != Value::String || format->text != "benanza-prior")
    throw std::runtime_error("prior: not a benanza prior (no \"format\": \"benanza-prior\")");
  if (!version || version->type != Value::Number)
    throw std::runtime_error("prior: no version");
  const Value* msg = doc.get("message");
  const Value* jobs = doc.get("jobs");
  if (!jobs || jobs->type != Value::Object) throw std::runtime_error("prior: no \"jobs\" object");
  Prior p;
  p.message_ = msg && msg->type == Value::String ? msg->text : "prior: not a contender";
  for (const auto& [id, j] : jobs->fields) {
    if (j.type != Value::Object) throw std::runtime_error("prior: job " + id + " is not an object");
    Job& out = p.jobs_[id];
    candidates(j.get("time"), id, "time", out.time);
    candidates(j.get("known"), id, "known", out.known);
  }
  return p;
}

Prior Prior::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read the prior " + path);
  std::ostringstream s;
  s << f.rdbuf();
  try {
    return parse(s.str());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

const Prior::Job* Prior::job(const std::string& id) const {
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

bool Prior::wanted(const Job* j, const std::string& call, const std::string& algorithm) {
  if (!j) return true;
  const Candidate c{call, algorithm};
  return j->time.count(c) > 0 || j->known.count(c) == 0;
}

bool Prior::wants_other(const Job* j, const std::string& call, const std::set<std::string>& algorithms) {
  if (!j) return true;
  for (const Candidate& c : j->time)
    if (c.first == call && !algorithms.count(c.second)) return true;
  return false;
}

}  // namespace benanza
