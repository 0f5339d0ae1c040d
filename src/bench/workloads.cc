// Parsing the workload CSV files.
#include "bench/workloads.h"

#include <charconv>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "core/error.h"

namespace tessel::bench {
namespace {

constexpr std::string_view kConvHeader = "name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups";
constexpr std::string_view kGemmHeader = "name,m,n,k,layout";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// One data line of a file, where errors point.
struct Line {
  const std::string& source;
  int number;
  std::vector<std::string_view> fields;
};

#define TESSEL_LINE_ERROR(line) TESSEL_USER_ERROR() << (line).source << ":" << (line).number << ": "

// The data lines of `text` with `columns` fields each (see the header for what is skipped).
std::vector<Line> data_lines(std::string_view text, const std::string& source,
                             std::string_view header) {
  const size_t columns = split(header).size();
  std::vector<Line> lines;
  int number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++number;
    if (raw.empty() || raw.front() == '#') continue;
    std::string compact;  // the line without blanks, to recognise a header written loosely
    for (char c : raw)
      if (c != ' ' && c != '\t') compact.push_back(c);
    if (compact == header) continue;
    Line line{source, number, split(raw)};
    if (line.fields.size() != columns) {
      TESSEL_LINE_ERROR(line) << "expected " << columns << " comma-separated fields (" << header
                              << "), got " << line.fields.size();
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// Field `index` (named by the header) as an integer >= `min`, small enough for every library
// that takes dimensions as int.
int64_t integer(const Line& line, size_t index, std::string_view header, int64_t min) {
  std::string_view field = line.fields[index];
  const std::string column(split(header)[index]);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || v < min ||
      v > std::numeric_limits<int32_t>::max()) {
    TESSEL_LINE_ERROR(line) << column << " is '" << field << "', expected an integer in [" << min
                            << ", " << std::numeric_limits<int32_t>::max() << "]";
  }
  return v;
}

std::string name(const Line& line, std::set<std::string>& seen) {
  std::string n(line.fields[0]);
  if (n.empty()) TESSEL_LINE_ERROR(line) << "empty workload name";
  if (!seen.insert(n).second) TESSEL_LINE_ERROR(line) << "workload '" << n << "' is defined twice";
  return n;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TESSEL_USER_CHECK(in) << "cannot open workload file '" << path << "'";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

double ConvWorkload::flops() const {
  // Exact in int64 for any workload the parser accepts that fits in device memory.
  return 2.0 * static_cast<double>(n * oh() * ow() * co * kh * kw * (ci / groups));
}

std::string ConvWorkload::shape() const {
  std::ostringstream os;
  os << "n" << n << " " << h << "x" << w << "x" << ci << " -> " << co << " k" << kh << "x" << kw
     << " s" << stride << " p" << pad << " d" << dilation << " g" << groups;
  return os.str();
}

std::optional<GemmWorkload> as_gemm(const ConvWorkload& c) {
  if (c.kh != 1 || c.kw != 1 || c.stride != 1 || c.pad != 0 || c.groups != 1) return std::nullopt;
  GemmWorkload g;
  g.name = c.name;
  g.m = c.n * c.h * c.w;
  g.n = c.co;
  g.k = c.ci;
  g.layout = GemmLayout::kNT;
  return g;
}

std::string_view layout_name(GemmLayout l) {
  switch (l) {
    case GemmLayout::kNN:
      return "NN";
    case GemmLayout::kNT:
      return "NT";
    case GemmLayout::kTN:
      return "TN";
  }
  return "?";
}

std::string GemmWorkload::shape() const {
  std::ostringstream os;
  os << m << "x" << n << "x" << k << " " << layout_name(layout);
  return os.str();
}

std::vector<ConvWorkload> parse_conv_workloads(std::string_view text, const std::string& source) {
  std::vector<ConvWorkload> out;
  std::set<std::string> seen;
  for (const Line& line : data_lines(text, source, kConvHeader)) {
    auto field = [&](size_t i, int64_t min) { return integer(line, i, kConvHeader, min); };
    ConvWorkload c;
    c.name = name(line, seen);
    c.n = field(1, 1);
    c.h = field(2, 1);
    c.w = field(3, 1);
    c.ci = field(4, 1);
    c.co = field(5, 1);
    c.kh = field(6, 1);
    c.kw = field(7, 1);
    c.stride = field(8, 1);
    c.pad = field(9, 0);
    c.dilation = field(10, 1);
    c.groups = field(11, 1);
    if (c.ci % c.groups != 0 || c.co % c.groups != 0) {
      TESSEL_LINE_ERROR(line) << "ci=" << c.ci << " and co=" << c.co
                              << " must both be divisible by groups=" << c.groups;
    }
    if (c.h + 2 * c.pad < c.dilation * (c.kh - 1) + 1 ||
        c.w + 2 * c.pad < c.dilation * (c.kw - 1) + 1) {
      TESSEL_LINE_ERROR(line) << "a " << c.kh << "x" << c.kw << " kernel with dilation "
                              << c.dilation << " does not fit the " << c.h << "x" << c.w
                              << " input padded by " << c.pad;
    }
    out.push_back(std::move(c));
  }
  TESSEL_USER_CHECK(!out.empty()) << source << ": no conv2d workloads";
  return out;
}

std::vector<GemmWorkload> parse_gemm_workloads(std::string_view text, const std::string& source) {
  std::vector<GemmWorkload> out;
  std::set<std::string> seen;
  for (const Line& line : data_lines(text, source, kGemmHeader)) {
    GemmWorkload g;
    g.name = name(line, seen);
    g.m = integer(line, 1, kGemmHeader, 1);
    g.n = integer(line, 2, kGemmHeader, 1);
    g.k = integer(line, 3, kGemmHeader, 1);
    const std::string_view layout = line.fields[4];
    if (layout == "NN") {
      g.layout = GemmLayout::kNN;
    } else if (layout == "NT") {
      g.layout = GemmLayout::kNT;
    } else if (layout == "TN") {
      g.layout = GemmLayout::kTN;
    } else {
      TESSEL_LINE_ERROR(line) << "layout is '" << layout << "', expected NN, NT or TN";
    }
    out.push_back(std::move(g));
  }
  TESSEL_USER_CHECK(!out.empty()) << source << ": no gemm workloads";
  return out;
}

std::vector<ConvWorkload> read_conv_workloads(const std::string& path) {
  return parse_conv_workloads(read_file(path), path);
}

std::vector<GemmWorkload> read_gemm_workloads(const std::string& path) {
  return parse_gemm_workloads(read_file(path), path);
}

}  // namespace tessel::bench
