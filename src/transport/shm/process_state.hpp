// Is a peer process still running? kill(pid, 0) alone is not enough: a process
// that exited but was not yet reaped by its parent (a zombie) still answers it.
#pragma once

#include <sys/types.h>

#include <string_view>

namespace chorus::transport::shm {

/// The state letter of a /proc/<pid>/stat line ("R", "S", "Z", ...): the first
/// non-space after the LAST ')', because the command name in parentheses may
/// itself contain ')' and spaces. '\0' when the line has no such letter.
char state_from_stat(std::string_view stat);

/// False when `pid` is gone: no such process, or one in state 'Z' (zombie) or
/// 'X' (dead) per /proc/<pid>/stat. When /proc cannot be read (not mounted,
/// no permission) only kill(pid, 0) decides.
bool process_alive(pid_t pid);

}  // namespace chorus::transport::shm
