// Child processes and where this program lives: what `dpscope lesson` uses to start dpscope-viz,
// xvfb-run and python3, and what dpscope-viz uses to run a lesson's scenario through `dpscope`.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace dpscope {

// The directory of the running executable (dpscope and dpscope-viz are built side by side).
std::filesystem::path executable_dir();

// The full path of `program` on $PATH, or "" when it is not there.
std::string find_on_path(const std::string& program);

// Starts `argv` (argv[0] a path) with stdout and stderr sent to `log`, or left alone when `log` is
// empty; returns its pid, or -1 when it could not start or the process is ending (stop_children()
// has run). With `own_group` it leads a process group
// of its own, so that wait_process() can end it with everything it started (xvfb-run's Xvfb and
// viewer) when it runs past its time.
pid_t spawn_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                    bool own_group = false);

// Whether process `pid` exists: kill(pid, 0) probes without signalling; ESRCH means no such
// process, EPERM that it exists (owned by someone else). What the sweeps of a dead writer's
// temporary files and of dead runs' scratch directories ask.
bool process_exists(pid_t pid);

// Waits for child `pid`: its exit status, or -1 when it died of a signal or, with `timeout_s` > 0,
// did not exit within that many seconds (it is then killed with SIGKILL, with its process group
// when it leads one, and reaped). It then forgets the child (forget_child).
int wait_process(pid_t pid, double timeout_s = 0.0);

// The children this process has not reaped yet: spawn_process() remembers each it starts, and
// wait_process() forgets it; a child started otherwise (fork) joins with track_child() and leaves
// with forget_child() once reaped. What stop_children() ends.
void track_child(pid_t pid);
// Forgets `pid`. While stop_children() runs or has run, the process is ending on a signal: the
// calling thread then waits here for that end (at most a minute) instead of going on to report a
// child's failure that is none, or to start the next step.
void forget_child(pid_t pid);

// Ends every child this process has not reaped, before it ends itself on a signal: a child left
// running would go on writing where the process is cleaning up (lesson/run_dir.hpp: a py_compile
// killed with its parent once made the removed directory again). SIGTERM (and SIGCONT) to each, to
// its whole group when it leads one; SIGKILL to what still runs after `grace_s`. Returns once each
// is gone (reaped here or by its waiting thread), or a few seconds after SIGKILL at most.
void stop_children(double grace_s);

// spawn_process() and wait_process(): the exit status, or -1 when it could not start, did not exit
// or (timeout_s > 0) was still running after timeout_s and was killed with all it started (it runs
// in a process group of its own then). A Python that hangs once
// held `dpscope lesson` forever.
int run_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                double timeout_s = 0.0);

// The last line of `log` that is not blank: what a child that failed said last ("" when none).
std::string last_log_line(const std::filesystem::path& log);

}  // namespace dpscope
