// Declaration only; see README.md in this folder.
#pragma once

#include "gloo/context.h"
