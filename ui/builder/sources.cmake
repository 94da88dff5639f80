# The experiment builder panel: forms generated from spec's field catalogue,
# validation beside each field, memory panel, model/data preview, the data inspector, [search]
# editor, templates.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/buildercontroller.cpp ${CMAKE_CURRENT_LIST_DIR}/buildercontroller.h
  ${CMAKE_CURRENT_LIST_DIR}/inspectpanel.cpp ${CMAKE_CURRENT_LIST_DIR}/inspectpanel.h
  ${CMAKE_CURRENT_LIST_DIR}/memorychart.cpp ${CMAKE_CURRENT_LIST_DIR}/memorychart.h
  ${CMAKE_CURRENT_LIST_DIR}/previewpanel.cpp ${CMAKE_CURRENT_LIST_DIR}/previewpanel.h
  ${CMAKE_CURRENT_LIST_DIR}/searcheditor.cpp ${CMAKE_CURRENT_LIST_DIR}/searcheditor.h
  ${CMAKE_CURRENT_LIST_DIR}/builderpanel.cpp ${CMAKE_CURRENT_LIST_DIR}/builderpanel.h)
# Templates ship as TOML resources; the demo template is examples/demo.toml itself.
set_source_files_properties(${PROJECT_SOURCE_DIR}/examples/demo.toml
                            PROPERTIES QT_RESOURCE_ALIAS templates/demo.toml)
qt_add_resources(shardscope_ui builder_templates PREFIX /builder
  BASE ${CMAKE_CURRENT_LIST_DIR}
  FILES ${CMAKE_CURRENT_LIST_DIR}/templates/qwen2-vl-2b-lora.toml
        ${CMAKE_CURRENT_LIST_DIR}/templates/full-finetune.toml
        ${PROJECT_SOURCE_DIR}/examples/demo.toml)
