// The checkpoint index as text; see index.hpp.
#include "index.hpp"

#include "files.hpp"

#include <chorus/error.hpp>

#include <charconv>
#include <sstream>

namespace chorus::train::detail {
namespace {

constexpr const char* kMagic = "chorus-checkpoint 1";

std::string escape(const std::string& s) {
  if (s.empty()) return "~";
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c > ' ' && c <= '~' && c != '%' && c != '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string shape_text(const Shape& shape) {
  if (shape.empty()) return "-";
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out;
}

char kind_letter(PlacementKind kind) {
  return kind == PlacementKind::Shard ? 'S' : kind == PlacementKind::Flat ? 'F' : 'R';
}

void format_piece(std::ostream& out, const IndexPiece& p) {
  out << "piece " << escape(p.tensor) << ' ' << p.file << ' ' << p.offset << ' ' << p.bytes << ' '
      << to_hex(p.checksum) << ' ' << p.placements.size();
  for (const Placement& q : p.placements) {
    out << ' ' << kind_letter(q.kind) << ' ' << escape(q.mesh_dim) << ' ' << q.index << ' '
        << q.count << ' ' << q.dim << ' ' << q.offset << ' ' << q.length;
  }
  out << '\n';
}

/// The tokens of one line, read in order; any failure is the line's malformation.
class Line {
 public:
  struct Malformed {};
  explicit Line(const std::string& text) {
    std::istringstream in(text);
    for (std::string token; in >> token;) tokens_.push_back(token);
  }
  bool done() const { return next_ == tokens_.size(); }
  const std::string& word() {
    if (done()) throw Malformed{};
    return tokens_[next_++];
  }
  std::string text() { return unescape(word()); }
  template <class Int>
  Int number(int base = 10) {
    const std::string& w = word();
    Int value{};
    const auto [end, error] = std::from_chars(w.data(), w.data() + w.size(), value, base);
    if (error != std::errc() || end != w.data() + w.size()) throw Malformed{};
    return value;
  }
  Shape shape() {
    const std::string w = word();
    Shape out;
    if (w == "-") return out;
    std::istringstream in(w);
    for (std::string part; std::getline(in, part, ',');)
      out.push_back(Line(part).number<std::int64_t>());
    return out;
  }
  Placement placement() {
    Placement p;
    const std::string kind = word();
    if (kind != "R" && kind != "S" && kind != "F") throw Malformed{};
    p.kind = kind == "S"   ? PlacementKind::Shard
             : kind == "F" ? PlacementKind::Flat
                           : PlacementKind::Replicate;
    p.mesh_dim = text();
    p.index = number<int>();
    p.count = number<int>();
    p.dim = number<std::int64_t>();
    p.offset = number<std::int64_t>();
    p.length = number<std::int64_t>();
    return p;
  }

 private:
  static std::string unescape(const std::string& s) {
    if (s == "~") return "";
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '%') {
        out += s[i];
        continue;
      }
      if (i + 2 >= s.size()) throw Malformed{};
      out += static_cast<char>(Line(s.substr(i + 1, 2)).number<int>(16));
      i += 2;
    }
    return out;
  }
  std::vector<std::string> tokens_;
  std::size_t next_ = 0;
};

void parse_record(Line& line, const std::string& key, Index& index) {
  TrainingState& state = index.header.state;
  if (key == "tag") {
    index.tag = line.text();
  } else if (key == "step") {
    state.step = line.number<std::int64_t>();
  } else if (key == "epoch") {
    state.epoch = line.number<std::int64_t>();
  } else if (key == "extra") {
    const std::string name = line.text();
    state.extra[name] = line.number<std::int64_t>();
  } else if (key == "config" || key == "model") {
    const std::string name = line.text();
    (key == "config" ? state.config : index.header.model)[name] = line.text();
  } else if (key == "file") {
    IndexFile& f = index.files.emplace_back();
    f.rank = line.number<int>();
    f.name = line.text();
    f.bytes = line.number<std::int64_t>();
  } else if (key == "tensor") {
    IndexTensor& t = index.tensors.emplace_back();
    t.name = line.text();
    t.dtype = line.text();
    t.shape = line.shape();
  } else if (key == "piece") {
    IndexPiece& p = index.pieces.emplace_back();
    p.tensor = line.text();
    p.file = line.number<int>();
    p.offset = line.number<std::int64_t>();
    p.bytes = line.number<std::int64_t>();
    p.checksum = line.number<std::uint64_t>(16);
    const auto n = line.number<std::size_t>();
    for (std::size_t i = 0; i < n; ++i) p.placements.push_back(line.placement());
  } else {
    throw Line::Malformed{};
  }
  if (!line.done()) throw Line::Malformed{};
}

Error malformed(const std::string& path, const std::string& what) {
  return Error(Status::SystemError, "checkpoint " + path + ": " + what);
}

}  // namespace

std::string format_index(const Index& index) {
  std::ostringstream out;
  const TrainingState& state = index.header.state;
  out << kMagic << "\ntag " << escape(index.tag) << "\nstep " << state.step << "\nepoch "
      << state.epoch << '\n';
  for (const auto& [key, value] : state.extra)
    out << "extra " << escape(key) << ' ' << value << '\n';
  for (const auto& [key, value] : state.config) {
    out << "config " << escape(key) << ' ' << escape(value) << '\n';
  }
  for (const auto& [key, value] : index.header.model) {
    out << "model " << escape(key) << ' ' << escape(value) << '\n';
  }
  for (const IndexFile& f : index.files) {
    out << "file " << f.rank << ' ' << escape(f.name) << ' ' << f.bytes << '\n';
  }
  for (const IndexTensor& t : index.tensors) {
    out << "tensor " << escape(t.name) << ' ' << escape(t.dtype) << ' ' << shape_text(t.shape)
        << '\n';
  }
  for (const IndexPiece& p : index.pieces) format_piece(out, p);
  const std::string body = out.str();
  return body + "checksum " + to_hex(checksum(body)) + "\n";
}

Index parse_index(const std::string& text, const std::string& path) {
  const std::string magic = std::string(kMagic) + "\n";
  if (text.compare(0, magic.size(), magic) != 0) {
    std::string first = text.substr(0, std::min(text.find('\n'), std::size_t{40}));
    for (char& c : first) c = c >= ' ' && c <= '~' ? c : '?';
    throw Error(Status::SystemError, "checkpoint " + path +
                                         " is not a Chorus tensor checkpoint (its index starts '" +
                                         first + "')");
  }
  const std::size_t last = text.rfind("checksum ");
  if (last == std::string::npos || (last > 0 && text[last - 1] != '\n') ||
      text.substr(last) != "checksum " + to_hex(checksum(text.substr(0, last))) + "\n") {
    throw malformed(path, "its index fails its checksum (truncated or corrupt)");
  }
  Index index;
  std::istringstream in(text.substr(magic.size(), last - magic.size()));
  int number = 1;
  for (std::string text_line; std::getline(in, text_line);) {
    ++number;
    try {
      Line line(text_line);
      parse_record(line, line.word(), index);
    } catch (const Line::Malformed&) {
      throw malformed(path, "malformed index line " + std::to_string(number) + ": '" +
                                text_line.substr(0, 80) + "'");
    }
  }
  return index;
}

}  // namespace chorus::train::detail
