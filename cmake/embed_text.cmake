# Writes OUT: a C++ source defining `const char* NAME()` that returns the text of IN (build time;
# CMakeLists.txt runs it whenever IN changes). The text must not contain the raw-string end ")drift_embed".
file(READ "${IN}" text)
string(FIND "${text}" ")drift_embed\"" bad)
if(NOT bad EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )drift_embed\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\nnamespace drift {\nconst char* ${NAME}() {\n  return R\"drift_embed(${text})drift_embed\";\n}\n}  // namespace drift\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
