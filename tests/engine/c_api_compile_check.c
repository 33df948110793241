/* Compiled as C: the public C header must stay valid C. */
#include "colibri/colibri.h"

int colibri_c_api_compiles_as_c(void) {
  colibri_options options = {0};
  colibri_engine* engine = 0;
  options.model_dir = "/nonexistent";
  return colibri_open(&options, &engine) == COLIBRI_NOT_FOUND && engine == 0;
}
