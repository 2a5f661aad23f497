# One object library per layer of DESIGN.md (core -> bootstrap -> transport -> algorithms ->
# comm -> capi), each compiled with only the headers its layer may use: the include path of
# layer L is a view directory of symbolic links to L and the layers below it, so that
# including a header of a higher layer, or a private part of the transport (its shared-memory
# and TCP links, transport/shm/ and transport/tcp/), fails to compile ("No such file").
#
# Above the transport, the view's transport/ holds the transport's public headers only:
# CHORUS_TRANSPORT_PUBLIC and the host arena, src/transport/arena/.
set(CHORUS_LAYERS core bootstrap transport algorithms comm capi)
set(CHORUS_LAYER_VIEWS ${PROJECT_BINARY_DIR}/layer-views)
set(CHORUS_TRANSPORT_PUBLIC
  transport.hpp     # the interface algorithms move messages through
  mesh.hpp          # connect_mesh: a communicator's transport and host arena
  liveness.hpp      # what the arena asks of the transport while it waits
  wait_policy.hpp   # how waits poll, yield and sleep
  doorbell.hpp)     # the arena's futex

# The transport's public part, as links in `dir`/transport.
function(chorus_link_transport_public dir)
  file(MAKE_DIRECTORY ${dir}/transport)
  foreach(name ${CHORUS_TRANSPORT_PUBLIC})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/transport/${name} ${dir}/transport/${name} SYMBOLIC)
  endforeach()
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/transport/arena ${dir}/transport/arena SYMBOLIC)
endfunction()

# Creates chorus_<layer> (an object library whose sources the layer's CMakeLists.txt adds)
# with its view as its only private include directory besides include/.
function(chorus_add_layer layer)
  set(view ${CHORUS_LAYER_VIEWS}/${layer})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  list(FIND CHORUS_LAYERS ${layer} position)
  list(FIND CHORUS_LAYERS transport transport_position)
  foreach(index RANGE ${position})
    list(GET CHORUS_LAYERS ${index} below)
    if(below STREQUAL "transport" AND position GREATER transport_position)
      chorus_link_transport_public(${view})
    else()
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${below} ${view}/${below} SYMBOLIC)
    endif()
  endforeach()
  add_library(chorus_${layer} OBJECT)
  target_include_directories(chorus_${layer}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    PRIVATE ${view})
  target_link_libraries(chorus_${layer} PRIVATE chorus_build_flags Threads::Threads)
  set_target_properties(chorus_${layer} PROPERTIES
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON POSITION_INDEPENDENT_CODE ON)
  if(CHORUS_HAVE_MEMSET_STRATEGY)
    target_compile_options(chorus_${layer} PRIVATE ${CHORUS_MEMSET_STRATEGY})
  endif()
  add_subdirectory(${PROJECT_SOURCE_DIR}/src/${layer})
endfunction()

# Tests that the views hold the rule: a probe that includes `header` with `layer`'s include
# path compiles (expect "compiles") or fails because the header is not there
# (expect "refused").
function(chorus_layer_probe layer header expect)
  string(MAKE_C_IDENTIFIER "${layer}_${header}" name)
  set(probe ${PROJECT_BINARY_DIR}/layer-probes/${name}.cpp)
  file(WRITE ${probe} "#include \"${header}\"\n")
  add_test(NAME layers.${layer}.${expect}.${header}
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -I${PROJECT_SOURCE_DIR}/include
      -I${CHORUS_LAYER_VIEWS}/${layer} ${probe})
  if(expect STREQUAL "refused")
    set_tests_properties(layers.${layer}.${expect}.${header} PROPERTIES
      PASS_REGULAR_EXPRESSION "${header}: No such file")
  endif()
endfunction()

function(chorus_add_layer_tests)
  chorus_layer_probe(algorithms transport/transport.hpp compiles)
  chorus_layer_probe(algorithms transport/arena/host_arena.hpp compiles)
  chorus_layer_probe(algorithms transport/shm/shm_link.hpp refused)
  chorus_layer_probe(algorithms transport/tcp/tcp_link.hpp refused)
  chorus_layer_probe(algorithms transport/progress_engine.hpp refused)
  chorus_layer_probe(algorithms comm/comm_state.hpp refused)
  chorus_layer_probe(comm transport/shm/shm_mesh.hpp refused)
  chorus_layer_probe(comm capi/handles.hpp refused)
  chorus_layer_probe(transport transport/shm/shm_link.hpp compiles)
  chorus_layer_probe(transport algorithms/algorithm.hpp refused)
  chorus_layer_probe(bootstrap transport/transport.hpp refused)
  chorus_layer_probe(core bootstrap/store.hpp refused)
endfunction()
