// .npy and raw files for `tally reduce`, and the report renderers. No GPU needed.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <fstream>
#include <string>
#include <thread>

#include "bench/report.hpp"
#include "io/npy.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tally_" + std::to_string(::getpid()) + "_" + name;
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<unsigned char> npy_with_header(const std::string& dict, std::size_t data_bytes) {
  const unsigned char lead[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                  static_cast<unsigned char>(dict.size()), 0};
  std::vector<unsigned char> b(10 + dict.size() + data_bytes, 0);
  std::memcpy(b.data(), lead, 10);
  std::memcpy(b.data() + 10, dict.data(), dict.size());
  return b;
}

std::vector<unsigned char> make_npy_image(dtype t, const std::vector<unsigned char>& data) {
  return io::make_npy(t, data.data(), data.size() / dtype_size(t));
}

// Every dtype numpy can describe (all but bf16, which comes as a raw file).
TEST(NpyCpu, RoundTripEveryDtype) {
  EXPECT_EQ(io::npy_descr(dtype::f16), "<f2");
  EXPECT_EQ(io::npy_descr(dtype::bf16), "?");
  for (int i = 0; i < kDtypeCount; ++i) {
    const dtype t = static_cast<dtype>(i);
    if (t == dtype::bf16) continue;
    std::vector<unsigned char> data(7 * dtype_size(t));
    for (std::size_t k = 0; k < data.size(); ++k) data[k] = static_cast<unsigned char>(k * 37 + i);
    const auto img = make_npy_image(t, data);
    const std::string p = temp_path(std::string("rt_") + to_string(t) + ".npy");
    write_bytes(p, img);
    const io::loaded_array a = io::read_npy(p);
    EXPECT_EQ(a.type, t);
    EXPECT_EQ(a.count, 7u);
    EXPECT_EQ(a.bytes, data);
    std::remove(p.c_str());
  }
}

TEST(NpyCpu, HeaderForms) {
  auto h = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }\n", 96);
  io::npy_header r = io::parse_npy_header(h.data(), h.size());
  EXPECT_EQ(r.type, dtype::f64);
  EXPECT_EQ(r.count, 12u);
  h = npy_with_header("{\"descr\": \"|u1\", \"shape\": (), \"fortran_order\": True}", 1);
  r = io::parse_npy_header(h.data(), h.size());
  EXPECT_EQ(r.type, dtype::u8);
  EXPECT_EQ(r.count, 1u);  // a 0-d array holds one element
  EXPECT_TRUE(r.fortran_order);
  h = npy_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (0,), }", 0);
  EXPECT_EQ(io::parse_npy_header(h.data(), h.size()).count, 0u);
}

TEST(NpyCpu, BadFilesNameTheProblem) {
  const unsigned char junk[] = "PK\x03\x04 not numpy";
  EXPECT_NE(error_of([&] { io::parse_npy_header(junk, sizeof junk); }).find("bad magic"), std::string::npos);
  auto h = npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("big-endian"), std::string::npos);
  h = npy_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("unsupported dtype '<c8'"),
            std::string::npos);
  h = npy_with_header("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", 4);
  EXPECT_EQ(io::parse_npy_header(h.data(), h.size()).type, dtype::f16);
  // How ml_dtypes stores bfloat16: an opaque 2-byte void, refused with a pointer to raw files.
  h = npy_with_header("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("unsupported dtype '<V2'"),
            std::string::npos);
  h = npy_with_header("{'descr': '<f4', 'fortran_order': False }", 0);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("no 'shape'"), std::string::npos);
  h = npy_with_header("{'descr': '<f4', 'shape': (2,", 0);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("malformed"), std::string::npos);
  h = npy_with_header("{'descr': '<f4', 'shape': (99999999999, 99999999999, 99999999999), }", 0);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("overflows"), std::string::npos);
  std::vector<unsigned char> v2 = {0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 0, 0};
  EXPECT_NE(error_of([&] { io::parse_npy_header(v2.data(), v2.size()); }).find("unsupported .npy version 9"),
            std::string::npos);
  std::vector<unsigned char> cut = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, '{'};
  EXPECT_NE(error_of([&] { io::parse_npy_header(cut.data(), cut.size()); }).find("truncated header"),
            std::string::npos);
  // A zero dimension does not hide the others' overflow (numpy: "array is too big"); a zero
  // with a modest shape is an empty array.
  h = npy_with_header("{'descr': '<f4', 'shape': (4294967296, 0, 4294967296), }", 0);
  EXPECT_NE(error_of([&] { io::parse_npy_header(h.data(), h.size()); }).find("shape overflows"),
            std::string::npos);
  h = npy_with_header("{'descr': '<f4', 'shape': (7, 0, 9), }", 0);
  EXPECT_EQ(io::parse_npy_header(h.data(), h.size()).count, 0u);
}

// Opened from a path: the preamble is checked before the header is read (another kind of file
// with bytes 8-11 read as a length of 4 GiB once had that much read first), a header longer than
// 1 MiB is refused by its length, and a count whose bytes pass 2^64 is said as such.
TEST(NpyCpu, OpenChecksThePreambleFirst) {
  const std::string p = temp_path("preamble.npy");
  write_bytes(p, {'P', 'K', 3, 4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'x', 'y'});
  EXPECT_NE(error_of([&] { io::open_npy(p); }).find("bad magic"), std::string::npos);
  write_bytes(p, {0x93, 'N', 'U', 'M', 'P', 'Y', 7, 0, 0xff, 0xff, 0xff, 0xff, '{'});
  EXPECT_NE(error_of([&] { io::open_npy(p); }).find("unsupported .npy version 7"), std::string::npos);
  write_bytes(p, {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0x0f, '{'});
  const std::string big = error_of([&] { io::open_npy(p); });
  EXPECT_NE(big.find("header says it is"), std::string::npos) << big;
  EXPECT_NE(big.find("up to 1 MiB"), std::string::npos) << big;
  auto h = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693953,), }", 8);
  write_bytes(p, h);
  const std::string wrap = error_of([&] { io::open_npy(p); });
  EXPECT_NE(wrap.find("more than 2^64 bytes"), std::string::npos) << wrap;
  std::remove(p.c_str());
}

TEST(NpyCpu, TruncatedAndOverlongData) {
  std::vector<float> v(10, 1.5f);
  std::vector<unsigned char> raw(reinterpret_cast<unsigned char*>(v.data()),
                                 reinterpret_cast<unsigned char*>(v.data()) + 40);
  auto img = make_npy_image(dtype::f32, raw);
  const std::string p = temp_path("cut.npy");
  img.resize(img.size() - 3);
  write_bytes(p, img);
  EXPECT_NE(error_of([&] { io::read_npy(p); }).find("truncated"), std::string::npos);
  img.resize(img.size() + 3 + 8);
  write_bytes(p, img);
  EXPECT_NE(error_of([&] { io::read_npy(p); }).find("bytes follow"), std::string::npos);
  std::remove(p.c_str());
  EXPECT_NE(error_of([&] { io::read_npy(temp_path("missing.npy")); }).find("cannot open"), std::string::npos);
}

// Opened for streaming: the header checked at open, the data read in any pieces, from several
// threads, and a file cut short after it was opened said so by name.
TEST(NpyCpu, ArrayFilesReadInPieces) {
  std::vector<std::int32_t> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i * 7 - 300);
  const std::string p = temp_path("pieces.npy");
  io::write_npy(p, dtype::i32, v.data(), {20, 50});
  const io::array_file f = io::open_npy(p);
  EXPECT_EQ(f.type(), dtype::i32);
  EXPECT_EQ(f.count(), 1000u);
  EXPECT_EQ(f.shape(), (std::vector<std::uint64_t>{20, 50}));
  std::vector<std::int32_t> got(1000, 0);
  std::vector<std::thread> ts;
  for (std::uint64_t at = 0; at < 1000; at += 333)
    ts.emplace_back([&, at] { f.read(got.data() + at, at, std::min<std::uint64_t>(333, 1000 - at)); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(got, v);
  // Mapped in place: the same elements after the header; a moved-to file keeps the mapping.
  const auto* m = static_cast<const std::int32_t*>(f.mapped());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(std::vector<std::int32_t>(m, m + 1000), v);
  EXPECT_EQ(f.mapped(), m);
  {
    io::array_file g = io::open_npy(p);
    const void* gm = g.mapped();
    io::array_file h(std::move(g));
    EXPECT_EQ(h.mapped(), gm);
    EXPECT_EQ(g.mapped(), nullptr);  // moved from: no file, no mapping (and nothing unmapped twice)
  }
  EXPECT_TRUE(io::read_npy(p).bytes == std::vector<unsigned char>(reinterpret_cast<unsigned char*>(v.data()),
                                                                 reinterpret_cast<unsigned char*>(v.data()) + 4000));
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  const off_t header = st.st_size - 4000;
  ASSERT_EQ(::truncate(p.c_str(), header + 400), 0);  // 100 elements left
  EXPECT_NE(error_of([&] { f.read(got.data(), 90, 20); }).find("the file ended at byte"), std::string::npos);
  EXPECT_NE(error_of([&] { io::open_npy(p); }).find("truncated"), std::string::npos);
  const io::array_file r = io::open_raw(p, dtype::u8);
  EXPECT_EQ(r.count(), static_cast<std::uint64_t>(header + 400));
  if ((header + 400) % 8 != 0) {
    EXPECT_NE(error_of([&] { io::open_raw(p, dtype::f64); }).find("whole number"), std::string::npos);
  }
  ASSERT_EQ(::truncate(p.c_str(), header + 401), 0);
  EXPECT_NE(error_of([&] { io::open_raw(p, dtype::i32); }).find("whole number"), std::string::npos);
  std::remove(p.c_str());
}

// Not a regular file: a directory and a FIFO are named as such (reading a FIFO would block).
TEST(NpyCpu, DirectoriesAndFifosAreRefusedByName) {
  const std::string dir = ::testing::TempDir();
  EXPECT_NE(error_of([&] { io::read_npy(dir); }).find("is a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { io::read_raw(dir, dtype::f32); }).find("is a directory"), std::string::npos);
  const std::string fifo = dir + "tally_fifo_" + std::to_string(::getpid()) + ".npy";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { io::read_npy(fifo); }).find("not a regular file"), std::string::npos);
  ::unlink(fifo.c_str());
  EXPECT_NE(error_of([&] { io::check_input_file(dir + "no-such-file.npy"); }).find("cannot open"), std::string::npos);
}

TEST(RawCpu, SizeMustBeWholeElements) {
  const std::string p = temp_path("raw.bin");
  write_bytes(p, std::vector<unsigned char>(10, 1));
  EXPECT_EQ(io::read_raw(p, dtype::i16).count, 5u);
  EXPECT_NE(error_of([&] { io::read_raw(p, dtype::f32); }).find("not a whole number of f32"), std::string::npos);
  std::remove(p.c_str());
}

TEST(ReportCpu, MarkdownCsvJson) {
  bench::report r;
  r.meta["device"] = "test";
  bench::table t{"demo", {{"n", "n"}, {"us", "time us", 2}, {"note", "note"}}, {}};
  t.rows.push_back({{"n", "2^10"}, {"us", 1.23456}, {"note", "a,b"}});
  t.rows.push_back({{"n", "2^12"}, {"us", 10.0}});
  r.tables.push_back(t);
  const std::string md = r.markdown();
  EXPECT_NE(md.find("### demo"), std::string::npos);
  EXPECT_NE(md.find("| 2^10 |    1.23 |  a,b |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2^12 |   10.00 |      |"), std::string::npos) << md;
  const std::string csv = r.csv();
  EXPECT_NE(csv.find("n,us,note\n2^10,1.23456,\"a,b\"\n2^12,10,\n"), std::string::npos) << csv;
  const auto j = r.to_json();
  EXPECT_EQ(j["meta"]["device"], "test");
  EXPECT_DOUBLE_EQ(j["tables"][0]["rows"][0]["us"].get<double>(), 1.23456);
}

}  // namespace
}  // namespace tally::test
