// A fixture for the test `layering_check_refuses_upward_include`: core may not include train, a
// layer that depends on it. Never compiled; cmake/CheckLayers.cmake must report this include.
#include "dpscope/core/device.hpp"
#include "dpscope/train/train.hpp"
