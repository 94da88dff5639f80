# The experiment builder panel (issue #7): forms for every section of the experiment file.
target_sources(shardscope_ui PRIVATE)
