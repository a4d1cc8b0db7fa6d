"""The leash: the small supervisor every agent runs under, so no agent outlives the Pacer process
that started it and nothing the agent spawned outlives the agent.

    python3 -I -S leash.py --parent 4242 --grace 3 [--fd 9] [--user 999:995] -- claude -p --output-format stream-json

Run as a script (standard library only, no Pacer import) with Pacer's credentials and the agent's
environment, in a process group of its own; the agent becomes `--user` (uid:gid) before it runs,
so it can neither signal nor read its supervisor. It

- asks the kernel for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`) and exits at once if the
  parent is already gone, so a kill -9 of `pacer serve` or `pacer worker` ends the turn's agent
  instead of leaving it to finish unsupervised while recovery runs the same prompt again;
- becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever the agent double-forks or
  `setsid`s away is re-parented here, not to init, and so stays in reach;
- sets `PR_SET_NO_NEW_PRIVS`, so nothing the agent runs can gain privileges through a set-user-ID
  program (sudo, su);
- starts the agent with a parent-death signal of its own (SIGKILL), so killing the leash kills it,
  and with the descriptor `--fd` names (the prompt file) as its descriptor 3;
- on SIGTERM, SIGINT or SIGHUP (a halt, a timeout, or its parent's death) sends SIGTERM to every
  descendant, waits `--grace` seconds, then SIGKILLs what is left;
- when the agent exits, SIGKILLs every descendant it left behind and exits with the agent's code
  (128 + the signal number when a signal ended it).

Exit codes of its own: 125 when its parent was gone before the agent started, 127 when the
agent's program cannot be executed.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PARENT_GONE = 125
NOT_EXECUTABLE = 127
CANNOT_RUN = "leash: cannot run"  # how its stderr begins when the agent's program cannot be executed
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GIVEN_FD = 3  # where a descriptor the runner hands over (`--fd`) lands in the agent
TICK_SECONDS = 0.2  # how often the leash reaps adopted orphans while it waits

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def descendants(root: int) -> list[int]:
    """Every live process below `root`, read from /proc: parents before their children."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # the name in parentheses may hold spaces
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    level = children.get(root, [])
    while level:
        found.extend(level)
        level = [child for pid in level for child in children.get(pid, [])]
    return found


def _signal_all(sig: int) -> None:
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap() -> list[tuple[int, int]]:
    """Collect every child that has exited (the agent and adopted orphans) without blocking."""
    reaped: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append((pid, status))


def _exec_agent(command: list[str], leash: int, given: int | None, user: tuple[int, int] | None) -> None:
    """In the forked child: become the agent's user, die with the leash, then become the agent
    (with `given` as its fd 3)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        if user is not None:  # from root: every capability goes with the uid
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        if os.getppid() != leash:
            os._exit(PARENT_GONE)
        if given is not None and given != GIVEN_FD:
            os.dup2(given, GIVEN_FD)
            os.close(given)
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"{CANNOT_RUN} {command[0]}: {exc.strerror or exc}\n".encode())
    os._exit(NOT_EXECUTABLE)


def _let_go_of_stdin() -> None:
    """The leash reads nothing: its copy of stdin becomes /dev/null, so the agent's is the pipe's one reader."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def supervise(
    command: list[str], parent: int, grace: float, given: int | None = None, user: tuple[int, int] | None = None
) -> int:
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        return PARENT_GONE
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    stop_asked: list[float] = []

    def stop(_sig: int, _frame: object) -> None:
        if not stop_asked:
            stop_asked.append(time.monotonic())
            _signal_all(signal.SIGTERM)

    # A stop asked while the agent is being forked waits for the fork, then reaches the agent.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)
    agent = os.fork()
    if agent == 0:
        _exec_agent(command, os.getppid(), given, user)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    _let_go_of_stdin()  # the agent's alone: one that closes it is seen to (`listening.StdinFeed`)
    pidfd = os.pidfd_open(agent)
    status: int | None = None
    killed = False
    while status is None:
        timeout = TICK_SECONDS
        if stop_asked and not killed:
            left = stop_asked[0] + grace - time.monotonic()
            if left <= 0:
                _signal_all(signal.SIGKILL)
                killed = True
            else:
                timeout = min(timeout, left)
        try:
            select.select([pidfd], [], [], timeout)
        except InterruptedError:
            pass
        for pid, code in _reap():
            if pid == agent:
                status = code
    os.close(pidfd)
    if given is not None:
        os.close(given)
    # The agent is done: whatever it left running goes with it, adopted orphans included.
    for _ in range(50):
        left_behind = descendants(os.getpid())
        if not left_behind:
            break
        _signal_all(signal.SIGKILL)
        _reap()
        time.sleep(0.01)
    _reap()
    return _exit_code(status)


def main(argv: list[str]) -> int:
    parent, grace, given, user, rest = None, 3.0, None, None, list(argv)
    while rest and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--parent" and rest:
            parent = int(rest.pop(0))
        elif flag == "--grace" and rest:
            grace = float(rest.pop(0))
        elif flag == "--fd" and rest:
            given = int(rest.pop(0))
        elif flag == "--user" and rest:
            uid, _, gid = rest.pop(0).partition(":")
            user = (int(uid), int(gid))
        else:
            sys.stderr.write(f"leash: unexpected argument {flag!r}\n")
            return 2
    if not rest or rest[0] != "--" or len(rest) < 2 or parent is None:
        sys.stderr.write(
            "usage: leash.py --parent PID [--grace SECONDS] [--fd FD] [--user UID:GID] -- PROGRAM [ARG...]\n"
        )
        return 2
    return supervise(rest[1:], parent, grace, given, user)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
