// Training text: a corpus on disk -> tokens -> a deterministic train/validation split -> batches
// of windows whose positions depend only on (seed, step), drawn from the counter-based generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
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

struct Corpus {
  Tokenizer tok;
  std::vector<int32_t> train, val;
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
void sample_windows(const std::vector<int32_t>& tokens, size_t context, size_t batch, uint64_t seed, uint64_t stream,
                    uint64_t draw, int32_t* out);

}  // namespace drift
