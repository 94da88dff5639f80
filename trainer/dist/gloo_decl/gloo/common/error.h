// Declaration only; see README.md in the parent folder. ProcessGroupGloo.hpp names nothing here.
#pragma once
