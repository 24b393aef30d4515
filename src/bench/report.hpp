// A report: metadata plus tables of rows, rendered as markdown (aligned), CSV or JSON.
// Numbers stay numbers in CSV and JSON; only markdown rounds them, per the column's digits.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tally::bench {

using json = nlohmann::ordered_json;

struct column {
  std::string key;     // the row field
  std::string header;  // markdown / CSV header
  int digits = -1;     // decimals in markdown; -1: the value as it is
};

struct table {
  std::string title;
  std::vector<column> columns;
  std::vector<json> rows;  // objects keyed by column.key
};

struct report {
  json meta = json::object();  // device, date, ceiling, command ...
  std::vector<table> tables;

  std::string markdown() const;
  std::string csv() const;  // one CSV block per table, a "# title" line before each
  json to_json() const;
  void write_file(const std::string& path, const std::string& text) const;
};

// "2026-11-22 10:31 UTC"
std::string utc_now();

}  // namespace tally::bench
