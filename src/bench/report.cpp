#include "bench/report.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tally/tally.hpp"

namespace tally::bench {
namespace {

std::string cell_text(const json& v, int digits) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number_unsigned()) return std::to_string(v.get<unsigned long long>());
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    return digits >= 0 ? fmt::format("{:.{}f}", d, digits) : fmt::format("{}", d);
  }
  return v.dump();
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string r = "\"";
  for (char c : s) r += c == '"' ? std::string("\"\"") : std::string(1, c);
  return r + "\"";
}

}  // namespace

std::string report::markdown() const {
  std::ostringstream out;
  for (const auto& t : tables) {
    if (!t.title.empty()) out << "### " << t.title << "\n\n";
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> width(t.columns.size());
    for (std::size_t c = 0; c < t.columns.size(); ++c) width[c] = t.columns[c].header.size();
    for (const auto& r : t.rows) {
      std::vector<std::string> line;
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const auto& col = t.columns[c];
        line.push_back(cell_text(r.contains(col.key) ? r[col.key] : json(), col.digits));
        width[c] = std::max(width[c], line.back().size());
      }
      cells.push_back(std::move(line));
    }
    auto emit = [&](const std::vector<std::string>& line) {
      out << "|";
      for (std::size_t c = 0; c < line.size(); ++c)
        out << " " << fmt::format("{:>{}}", line[c], width[c]) << " |";
      out << "\n";
    };
    std::vector<std::string> head;
    for (const auto& col : t.columns) head.push_back(col.header);
    emit(head);
    out << "|";
    for (std::size_t c = 0; c < width.size(); ++c) out << std::string(width[c] + 1, '-') << ":|";
    out << "\n";
    for (const auto& line : cells) emit(line);
    out << "\n";
  }
  return out.str();
}

std::string report::csv() const {
  std::ostringstream out;
  for (const auto& t : tables) {
    out << "# " << t.title << "\n";
    for (std::size_t c = 0; c < t.columns.size(); ++c)
      out << (c ? "," : "") << csv_escape(t.columns[c].key);
    out << "\n";
    for (const auto& r : t.rows) {
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const auto& key = t.columns[c].key;
        out << (c ? "," : "") << csv_escape(cell_text(r.contains(key) ? r[key] : json(), -1));
      }
      out << "\n";
    }
  }
  return out.str();
}

json report::to_json() const {
  json j;
  j["meta"] = meta;
  j["tables"] = json::array();
  for (const auto& t : tables) {
    json jt;
    jt["title"] = t.title;
    jt["rows"] = t.rows;
    j["tables"].push_back(jt);
  }
  return j;
}

void report::write_file(const std::string& path, const std::string& text) const {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw tally::error("cannot open " + path + " for writing");
  f << text;
  if (!f) throw tally::error("writing " + path + " failed");
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

}  // namespace tally::bench
