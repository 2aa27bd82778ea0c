#include "train/data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "arith/random.h"
#include "io/npy.h"
#include "io/read_file.h"

namespace drift {

namespace fs = std::filesystem;

namespace {

// Appends the code points of UTF-8 text; throws naming the file and byte offset of a bad sequence.
void decode_utf8(const std::string& s, const std::string& file, std::vector<uint32_t>* out) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size())
      throw io::IoError(file + ": not UTF-8 text (bad byte 0x" + [&] {
        std::ostringstream o;
        o << std::hex << static_cast<int>(c);
        return o.str();
      }() + " at offset " + std::to_string(i) + ")");
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) throw io::IoError(file + ": not UTF-8 text (bad continuation at offset " + std::to_string(i + k) + ")");
      cp = (cp << 6) | (d & 0x3f);
    }
    if (out) out->push_back(cp);
    i += len;
  }
}

}  // namespace

std::string resolve_data_path(const DataConfig& cfg) {
  std::error_code ec;
  const fs::path p(cfg.path);
  if (p.is_absolute() || fs::exists(p, ec) || cfg.config_dir.empty()) {
    if (!fs::exists(p, ec))
      throw io::IoError(cfg.path + ": no such file or directory (a relative path is looked for in the "
                        "current directory, then beside the config file and in the directories above it)");
    return cfg.path;
  }
  std::string tried;
  for (fs::path dir = fs::absolute(cfg.config_dir, ec).lexically_normal();; dir = dir.parent_path()) {
    if (fs::exists(dir / p, ec)) return (dir / p).string();
    tried += (tried.empty() ? "" : ", ") + dir.string();
    if (dir == dir.root_path() || dir.empty()) break;
  }
  throw io::IoError(cfg.path + ": no such file or directory (a relative path is looked for in the current directory, "
                    "then in the config file's directory and each one above it: " + tried + ")");
}

Corpus load_corpus(const DataConfig& cfg, size_t context) {
  Corpus c;
  c.tok.kind = cfg.tokenizer;
  std::error_code ec;
  const std::string path = resolve_data_path(cfg);
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec) && e.path().extension() == ".txt") c.files.push_back(e.path().string());
    if (ec) throw io::IoError(path + ": cannot list the directory (" + ec.message() + ")");
    std::sort(c.files.begin(), c.files.end());
    if (c.files.empty()) throw io::IoError(path + ": directory holds no *.txt files");
  } else {
    c.files.push_back(path);
  }
  std::string text;
  for (const auto& f : c.files) {
    std::string s = io::read_regular_file(f, "training text", io::kMaxDataBytes);
    if (s.empty()) throw io::IoError(f + ": empty file");
    decode_utf8(s, f, nullptr);  // validates
    text += s;
    if (text.back() != '\n') text += '\n';
  }
  c.bytes = text.size();
  std::vector<int32_t> tokens;
  if (cfg.tokenizer == "char") {
    std::vector<uint32_t> cps;
    decode_utf8(text, c.files.front(), &cps);
    c.tok.chars = cps;
    std::sort(c.tok.chars.begin(), c.tok.chars.end());
    c.tok.chars.erase(std::unique(c.tok.chars.begin(), c.tok.chars.end()), c.tok.chars.end());
    tokens.reserve(cps.size());
    for (uint32_t cp : cps)
      tokens.push_back(static_cast<int32_t>(std::lower_bound(c.tok.chars.begin(), c.tok.chars.end(), cp) - c.tok.chars.begin()));
  } else {
    tokens.reserve(text.size());
    for (unsigned char ch : text) tokens.push_back(ch);
  }
  const size_t nval = static_cast<size_t>(static_cast<double>(tokens.size()) * cfg.val_fraction);
  const size_t ntrain = tokens.size() - nval;
  const std::string what = c.files.size() == 1 ? c.files.front() : cfg.path;
  if (ntrain < context + 1 || nval < context + 1)
    throw io::IoError(what + ": too short: " + std::to_string(tokens.size()) + " tokens split into " +
                      std::to_string(ntrain) + " train + " + std::to_string(nval) + " validation; each split needs at least " +
                      std::to_string(context + 1) + " (model.context + 1)");
  c.train.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(ntrain));
  c.val.assign(tokens.begin() + static_cast<std::ptrdiff_t>(ntrain), tokens.end());
  return c;
}

void sample_windows(const std::vector<int32_t>& tokens, size_t context, size_t batch, uint64_t seed, uint64_t stream,
                    uint64_t draw, int32_t* out) {
  const uint64_t range = tokens.size() - context;  // valid start positions
  // The windows lie at random places in a corpus larger than the caches: all their starts first,
  // every line of every window asked for at once, so that the misses overlap instead of queueing
  // behind one copy after another.
  thread_local std::vector<size_t> starts;
  starts.resize(batch);
  for (size_t i = 0; i < batch; ++i) {
    const uint64_t idx = 2 * (draw * batch + i);
    const uint64_t r = (static_cast<uint64_t>(random_u32(seed, stream, idx)) << 32) | random_u32(seed, stream, idx + 1);
    starts[i] = static_cast<size_t>(r % range);  // bias < range / 2^64
    constexpr size_t kTokensPerLine = 64 / sizeof(int32_t);
    for (size_t t = 0; t < context + kTokensPerLine; t += kTokensPerLine)  // (through the line of its last token)
      __builtin_prefetch(tokens.data() + starts[i] + std::min(t, context));
  }
  for (size_t i = 0; i < batch; ++i)
    std::copy(tokens.begin() + static_cast<std::ptrdiff_t>(starts[i]),
              tokens.begin() + static_cast<std::ptrdiff_t>(starts[i] + context + 1), out + i * (context + 1));
}

}  // namespace drift
