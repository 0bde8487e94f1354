# The layering rule of dpscope, checked on every configure and by the test `layering_check`:
# a file may include headers of its own layer and of the layers below it, never of a layer above.
#
#   runtime (bottom to top)
#     base          error.hpp, checked arithmetic: depends on nothing of ours
#     trace_format  the trace contract: schema (enums, event names, payloads, header), reader,
#                   stats, Chrome export; what the visualizer links
#     lesson        lesson files (TOML), triggers and answer expressions evaluated on a trace
#     core          devices, streams, events, tensors, presets, timing model, the TraceSink interface
#     kernels       every numeric op, dispatched by device kind
#     trace         the recorder (implements core's TraceSink, writes the trace_format)
#     io, data, nn, optim, comm, parallel, train, cli
#   visualizer
#     replay        base + trace_format only (a trace is all it knows)
#     ui            + replay
#     app           + core (presets, asset directory)
#
# Used two ways:
#   include(CheckLayers) + dpscope_check_layers(<root>)      at configure time (FATAL_ERROR on a violation)
#   cmake -DDPSCOPE_LAYER_ROOT=<root> -P cmake/CheckLayers.cmake   from a test (exit code 1 on a violation)
# <root> is a source tree with runtime/ and visualizer/ (the test also runs it on a fixture tree
# holding one upward include, and expects it to fail).

set(DPSCOPE_RUNTIME_LAYERS base trace_format lesson core kernels trace io data nn optim comm parallel train cli)

# The rank of `layer` in DPSCOPE_RUNTIME_LAYERS, or -1.
function(_dpscope_layer_rank layer out)
  list(FIND DPSCOPE_RUNTIME_LAYERS "${layer}" rank)
  set(${out} ${rank} PARENT_SCOPE)
endfunction()

# Appends to `violations_var` one line per include in `file` of a runtime layer ranked above
# `max_rank` (or not in `allowed` when `allowed` is given).
function(_dpscope_check_file root file owner max_rank violations_var)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]dpscope/")
  set(violations ${${violations_var}})
  file(RELATIVE_PATH rel "${root}" "${file}")
  foreach(line IN LISTS lines)
    if(line MATCHES "dpscope/([a-z_]+)/([^\">]+)")
      set(target_layer "${CMAKE_MATCH_1}")
      set(header "${CMAKE_MATCH_2}")
      _dpscope_layer_rank("${target_layer}" target_rank)
      if(target_rank EQUAL -1)
        list(APPEND violations "${rel} includes dpscope/${target_layer}/${header}: '${target_layer}' is not a layer (${DPSCOPE_RUNTIME_LAYERS})")
      elseif(target_rank GREATER max_rank)
        list(APPEND violations "${rel} includes dpscope/${target_layer}/${header}: ${owner} may not include ${target_layer}, a higher layer")
      endif()
    endif()
  endforeach()
  set(${violations_var} ${violations} PARENT_SCOPE)
endfunction()

# Checks every source and header under `root`; returns the violations in `out` (empty when clean).
function(dpscope_layer_violations root out)
  set(violations "")
  foreach(layer IN LISTS DPSCOPE_RUNTIME_LAYERS)
    _dpscope_layer_rank(${layer} rank)
    set(dirs "${root}/runtime/include/dpscope/${layer}" "${root}/runtime/src/${layer}")
    if(layer STREQUAL "cli")
      list(APPEND dirs "${root}/runtime/cli")
    endif()
    foreach(dir IN LISTS dirs)
      if(IS_DIRECTORY "${dir}")
        file(GLOB_RECURSE files "${dir}/*.hpp" "${dir}/*.h" "${dir}/*.cpp" "${dir}/*.cu" "${dir}/*.cuh")
        foreach(f IN LISTS files)
          _dpscope_check_file("${root}" "${f}" "${layer}" ${rank} violations)
        endforeach()
      endif()
    endforeach()
  endforeach()
  # The visualizer sees runtime only through the trace contract (the app also reads presets).
  _dpscope_layer_rank(trace_format viz_rank)
  _dpscope_layer_rank(core app_rank)
  foreach(part replay ui app)
    set(dir "${root}/visualizer/${part}")
    set(max ${viz_rank})
    if(part STREQUAL "app")
      set(max ${app_rank})
    endif()
    if(IS_DIRECTORY "${dir}")
      file(GLOB_RECURSE files "${dir}/*.hpp" "${dir}/*.cpp")
      foreach(f IN LISTS files)
        _dpscope_check_file("${root}" "${f}" "visualizer/${part}" ${max} violations)
      endforeach()
    endif()
  endforeach()
  set(${out} "${violations}" PARENT_SCOPE)
endfunction()

function(dpscope_check_layers root)
  dpscope_layer_violations("${root}" violations)
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "dpscope: upward includes (see docs/architecture.md, 'Layers'):\n  ${text}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED DPSCOPE_LAYER_ROOT)
  dpscope_layer_violations("${DPSCOPE_LAYER_ROOT}" violations)
  if(violations)
    foreach(v IN LISTS violations)
      message("layering: ${v}")
    endforeach()
    list(LENGTH violations n)
    message(FATAL_ERROR "layering: ${n} upward include(s)")
  endif()
  message("layering: no upward include")
endif()
