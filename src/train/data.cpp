#include "train/data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <tuple>

#include "arith/random.h"
#include "io/npy.h"
#include "io/read_file.h"

namespace drift {

namespace fs = std::filesystem;

namespace {

// Calls f(code point) for each character of the UTF-8 text s[0, n); throws naming `file` and the
// byte offset (from s) of a bad sequence.
template <class F>
void for_each_code_point(const char* s, size_t n, const std::string& file, F&& f) {
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > n)
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
    f(cp);
    i += len;
  }
}

// The char tokenizer: tok->chars (the text's code points, ascending) and the text's ids, one byte
// each where there are at most 256 of them. Two passes over the text (which code points occur;
// then the ids), so that no list of its code points is held.
Tokens char_ids(const std::string& text, const std::string& file, Tokenizer* tok) {
  std::vector<bool> seen(size_t{1} << 21);  // (the decoder reads at most 21 bits)
  size_t count = 0;
  for_each_code_point(text.data(), text.size(), file, [&](uint32_t cp) {
    seen[cp] = true;
    ++count;
  });
  tok->chars.clear();
  for (uint32_t cp = 0; cp < seen.size(); ++cp)
    if (seen[cp]) tok->chars.push_back(cp);
  // The id of a code point: a table below 2^11 (every Latin, Greek and Cyrillic letter), a binary
  // search above.
  constexpr uint32_t kTable = 1u << 11;
  std::vector<int32_t> table(kTable, -1);
  for (size_t id = 0; id < tok->chars.size() && tok->chars[id] < kTable; ++id) table[tok->chars[id]] = static_cast<int32_t>(id);
  const std::vector<uint32_t>& chars = tok->chars;
  auto id_of = [&](uint32_t cp) {
    return cp < kTable ? table[cp]
                       : static_cast<int32_t>(std::lower_bound(chars.begin(), chars.end(), cp) - chars.begin());
  };
  auto fill = [&](auto ids) {
    size_t i = 0;
    for_each_code_point(text.data(), text.size(), file, [&](uint32_t cp) {
      ids[i++] = static_cast<typename decltype(ids)::value_type>(id_of(cp));
    });
    return Tokens(std::move(ids));
  };
  return chars.size() <= 256 ? fill(std::string(count, '\0')) : fill(std::vector<int32_t>(count));
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
  // The files read straight into one buffer, sized once.
  // (A size that cannot be read is left to the read to report.)
  uint64_t total = 0;
  bool sized = true;
  for (const auto& f : c.files) {
    const uintmax_t size = fs::file_size(f, ec);
    sized = sized && !ec && size <= io::kMaxDataBytes;
    total += sized ? size + 1 : 0;
  }
  std::string text;
  if (sized) text.reserve(total);
  for (const auto& f : c.files) {
    const size_t start = text.size();
    if (io::append_regular_file(f, "training text", io::kMaxDataBytes, &text) == 0) throw io::IoError(f + ": empty file");
    for_each_code_point(text.data() + start, text.size() - start, f, [](uint32_t) {});  // validates
    if (text.back() != '\n') text += '\n';
  }
  c.bytes = text.size();
  // The ids, and the last val_fraction of them split off: the bytes themselves (byte), or the char ids.
  Tokens ids = cfg.tokenizer == "char" ? char_ids(text, c.files.front(), &c.tok) : Tokens(std::move(text));
  const size_t ntokens = ids.size();
  const size_t nval = static_cast<size_t>(static_cast<double>(ntokens) * cfg.val_fraction);
  const size_t ntrain = ntokens - nval;
  const std::string what = c.files.size() == 1 ? c.files.front() : cfg.path;
  if (ntrain < context + 1 || nval < context + 1)
    throw io::IoError(what + ": too short: " + std::to_string(ntokens) + " tokens split into " +
                      std::to_string(ntrain) + " train + " + std::to_string(nval) + " validation; each split needs at least " +
                      std::to_string(context + 1) + " (model.context + 1)");
  std::tie(c.train, c.val) = std::move(ids).split(ntrain);
  return c;
}

void Tokens::copy(size_t begin, size_t n, int32_t* out) const {
  if (wide()) {
    std::copy_n(wide_.begin() + static_cast<std::ptrdiff_t>(begin), n, out);
  } else {
    const auto* p = reinterpret_cast<const unsigned char*>(narrow_.data()) + begin;
    std::copy_n(p, n, out);
  }
}

std::pair<Tokens, Tokens> Tokens::split(size_t at) && {
  Tokens tail;
  if (wide()) {
    tail.wide_.assign(wide_.begin() + static_cast<std::ptrdiff_t>(at), wide_.end());
    wide_.resize(at);
  } else {
    tail.narrow_.assign(narrow_, at);
    narrow_.resize(at);
  }
  return {std::move(*this), std::move(tail)};
}

void sample_windows(const Tokens& tokens, size_t context, size_t batch, uint64_t seed, uint64_t stream,
                    uint64_t draw, int32_t* out) {
  const uint64_t range = tokens.size() - context;  // valid start positions
  // The windows lie at random places in a corpus larger than the caches: all their starts first,
  // every line of every window asked for at once, so that the misses overlap instead of queueing
  // behind one copy after another.
  thread_local std::vector<size_t> starts;
  starts.resize(batch);
  const size_t ids_per_line = 64 / tokens.id_bytes();
  for (size_t i = 0; i < batch; ++i) {
    const uint64_t idx = 2 * (draw * batch + i);
    const uint64_t r = (static_cast<uint64_t>(random_u32(seed, stream, idx)) << 32) | random_u32(seed, stream, idx + 1);
    starts[i] = static_cast<size_t>(r % range);  // bias < range / 2^64
    for (size_t t = 0; t < context + ids_per_line; t += ids_per_line)  // (through the line of its last id)
      __builtin_prefetch(tokens.address(starts[i] + std::min(t, context)));
  }
  for (size_t i = 0; i < batch; ++i) tokens.copy(starts[i], context + 1, out + i * (context + 1));
}

}  // namespace drift
