// Training text: a corpus on disk -> tokens -> a deterministic train/validation split -> batches
// of windows whose positions depend only on (seed, step), drawn from the counter-based generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace drift {

struct DataConfig {
  std::string path = "data/austen";  // a UTF-8 text file, or a directory: its *.txt files in name order
  std::string tokenizer = "byte";    // byte (vocabulary 256) | char (the corpus's code points, sorted)
  double val_fraction = 0.1;         // the last fraction of the token stream is the validation split
  // Not a config key: the directory of the config file the run was read from (set by drift train and
  // explain). A relative `path` is looked for in the current directory, then in this directory and
  // each directory above it, so that the shipped configs (configs/*.json, "data/austen") work from
  // anywhere. Empty: the current directory only.
  std::string config_dir;
};

// Where `cfg.path` is, by the rule above; throws io::IoError naming every place looked in.
std::string resolve_data_path(const DataConfig& cfg);

struct Tokenizer {
  std::string kind = "byte";
  std::vector<uint32_t> chars;  // char: code point of each token id (ascending)
  size_t vocab() const { return kind == "byte" ? 256 : chars.size(); }
};

// One split's token ids, stored as narrowly as they allow: one byte each when every id is below 256
// (the byte tokenizer's ids are the text's own bytes; a char vocabulary of up to 256), else int32.
// (As int32 the corpus's ids had been 16 MB written once per run, and reading the shipped corpus had
// taken longer than a short run's training: a fresh page costs its fault and its zeroing.)
class Tokens {
 public:
  Tokens() = default;
  explicit Tokens(std::string narrow) : narrow_(std::move(narrow)) {}
  explicit Tokens(std::vector<int32_t> wide) : wide_(std::move(wide)) {}

  size_t size() const { return wide() ? wide_.size() : narrow_.size(); }
  bool empty() const { return size() == 0; }
  int32_t operator[](size_t i) const { return wide() ? wide_[i] : static_cast<unsigned char>(narrow_[i]); }
  int32_t back() const { return (*this)[size() - 1]; }
  // Ids [begin, begin + n) into out, as int32.
  void copy(size_t begin, size_t n, int32_t* out) const;
  // Where id i is held, and the bytes each id takes (to prefetch a window).
  const void* address(size_t i) const {
    return wide() ? static_cast<const void*>(wide_.data() + i) : static_cast<const void*>(narrow_.data() + i);
  }
  size_t id_bytes() const { return wide() ? sizeof(int32_t) : 1; }
  // (ids [0, at), ids [at, size())): the first keeps this one's storage, the second is a copy.
  std::pair<Tokens, Tokens> split(size_t at) &&;

 private:
  // Which form holds the ids: the one that is not empty (an empty split reads the same either way).
  bool wide() const { return !wide_.empty(); }

  std::string narrow_;
  std::vector<int32_t> wide_;
};

struct Corpus {
  Tokenizer tok;
  Tokens train, val;
  std::vector<std::string> files;  // what was read, in order
  uint64_t bytes = 0;
};

// Reads and tokenizes. Throws io::IoError (message starts with the file name) for a missing,
// unreadable, empty or non-UTF-8 file, or one too short for `context` (each split needs context+1 tokens).
Corpus load_corpus(const DataConfig& cfg, size_t context);

// Random streams of the batch draws (distinct from every other use of the generator).
constexpr uint64_t kTrainDataStream = 0xda7a0001;
constexpr uint64_t kValDataStream = 0xda7a0002;
// The proxy's label noise (model.label_noise): training step s's target noise is draw s of this
// stream (model/proxy.cpp); validation targets get none.
constexpr uint64_t kLabelNoiseStream = 0xda7a0003;

// out (batch, context+1): windows of `tokens` starting at positions drawn from
// (seed, stream, draw*batch + i), uniformly over [0, tokens.size() - context).
void sample_windows(const Tokens& tokens, size_t context, size_t batch, uint64_t seed, uint64_t stream,
                    uint64_t draw, int32_t* out);

}  // namespace drift
