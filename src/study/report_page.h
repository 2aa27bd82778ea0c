// `drift report`'s page: the template (src/study/report_page.html and report_page.js, compiled into
// drift) with the report data and the charting library inlined, as one self-contained HTML file.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace drift {

// The charting library is dygraphs from Debian's libjs-dygraphs, read when a report is written (not
// kept in drift): from $DRIFT_DYGRAPHS_DIR when set, else /usr/share/javascript/dygraphs.
std::string dygraphs_dir();

// Thrown when the library is not installed (the message says which package and path).
struct MissingLibraryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The page. `data` as gather_report_data returns it; `title` is escaped.
std::string render_report_html(const nlohmann::json& data, const std::string& title);

// Text safe inside an HTML element or attribute.
std::string html_escape(const std::string& s);

}  // namespace drift
