// A fixture for the test `layering_check_refuses_undeclared_layer`: a folder of sources that no
// dpscope_layer() line declares would escape the check, so the check reports the folder itself.
// Never compiled.
#include "dpscope/base/error.hpp"
