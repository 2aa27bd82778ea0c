// The keys of a training config, as data: one field table per section (config_fields.h), in the
// order config.json writes them. parse_run_config reads a document through these tables,
// resolved_config_json writes one, and tests/test_config_schema.cpp keeps docs/config.md's key table
// equal to config_key_docs(). A new scalar key is a member of its section's struct (whose
// initializer is the default), one row in that section's table (config_schema.cpp) and one row in
// docs/config.md.
#pragma once

#include <vector>

#include "train/config.h"
#include "train/config_fields.h"

namespace drift {

// The top level: version, seed, backend and the sections model, data, train, precision,
// divergence, diagnostics, output. Reading a section also runs the checks across its keys
// (e.g. model.heads must divide model.d_model).
const std::vector<Field<RunConfig>>& run_config_fields();

// The precision section's table (config_schema_precision.cpp), and its checks against the
// sections read before it (model.kind, train.batch).
const std::vector<Field<PrecisionConfig>>& precision_fields();
void check_precision_against_run(const RunConfig& c);

// Every key with its default, as docs/config.md's key table lists them.
std::vector<KeyDoc> config_key_docs();

}  // namespace drift
