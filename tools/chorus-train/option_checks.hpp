// The refusals of chorus-train's options (option_checks.cpp): the combinations a run does not
// support, each an InvalidArgument sentence naming the option and its value. options.cpp
// parses the command line and calls them once the defaults are resolved. No torch.
#pragma once

#include "options.hpp"

#include <chorus/error.hpp>

#include <string>

namespace chorus::train_tool {

/// InvalidArgument "<option> '<value>' is not valid: <why>".
Error bad(const std::string& option, const std::string& value, const std::string& why);

/// `value` as the shortest text a stream prints ("0.5", "1e-05").
std::string number_text(double value);

/// Refuses the GPT's options with another model, and what the GPT run does not support (its
/// MoE options included).
void check_gpt_options(const Options& o);
/// Refuses what ZeRO does not combine with (ZeRO-3's own limits included).
void check_zero_options(const Options& o);
/// Refuses --mixed-precision without ZeRO, with the LSTM, fp16 with the GPT and with --pp.
void check_mixed_precision(const Options& o);
/// Refuses --compute-profile without --partition time, and synthetic compute with what it
/// does not reproduce.
void check_pipeline_tool_options(const Options& o);

}  // namespace chorus::train_tool
