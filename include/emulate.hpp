// SPDX-License-Identifier: MIT
/// @file
/// @brief Every core header of emulate/ in one include (freestanding): the decoder and emulator for the instructions that exit.
/// Not included: emulate/hosted/ (hosted printers; include them yourself).
/// tests/freestanding checks that this lists every core header of the layer (subfolders too).
#pragma once

#include "emulate/alu.hpp"
#include "emulate/context.hpp"
#include "emulate/cpu_model.hpp"
#include "emulate/decoder.hpp"
#include "emulate/emulator.hpp"
#include "emulate/instruction.hpp"
#include "emulate/linearize.hpp"
#include "emulate/machine/control.hpp"
#include "emulate/machine/core.hpp"
#include "emulate/machine/data.hpp"
#include "emulate/machine/fetch.hpp"
#include "emulate/machine/io.hpp"
#include "emulate/machine/segment_load.hpp"
#include "emulate/machine/string.hpp"
#include "emulate/machine/system.hpp"
#include "emulate/outcome.hpp"
#include "emulate/platform.hpp"
#include "emulate/segment.hpp"
#include "emulate/shadow_vcpu.hpp"
#include "emulate/shadow_write.hpp"
#include "emulate/vmcb_context.hpp"
#include "emulate/vmcs_context.hpp"
