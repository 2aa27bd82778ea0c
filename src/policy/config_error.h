// The one error type of configuration parsing: where in the JSON, and what was expected there.
// The command line prints it as "<path>: <message>" and exits 2 (DESIGN.md, "Errors").
#pragma once

#include <stdexcept>
#include <string>

namespace drift {

struct ConfigError : std::runtime_error {
  std::string path;     // JSON path of the offending value, e.g. "precision.matmul[0].a.format" ("" = the root)
  std::string message;  // what is wrong and what was expected
  ConfigError(std::string path_, std::string message_)
      : std::runtime_error((path_.empty() ? std::string("(root)") : path_) + ": " + message_),
        path(std::move(path_)),
        message(std::move(message_)) {}
};

}  // namespace drift
