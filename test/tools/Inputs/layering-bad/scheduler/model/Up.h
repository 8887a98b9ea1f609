// A model header that reaches up into the kinds.
#include "scheduler/kinds/Kinds.h"
