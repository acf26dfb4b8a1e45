"""The guard of a record that untrusted code runs beside: only the trusted file's own code may write it.

Runs INSIDE the sandbox, in the library's interpreter, standard library only. A proof (the option's own code runs
inside it) and the snippet's observer (the question's snippet runs inside it) write one record each: the evidence
file, or the observation sent on the result channel. The code they run beside may be hostile, and runs in the same
interpreter, so :func:`_rp_guard_install` installs an audit hook (``sys.addaudithook``: it cannot be removed) before
any untrusted code runs. The record is written by the hook itself, on the event ``rp.record``, and only when:

* every frame from the caller up to the entry frame (``entry``: a proof's ``test_option_*``; None: the bottom of the
  stack) is code of the trusted file (the proof, the observer); no frame of code compiled from other text (the
  option's, the snippet's: ``<option>``, ``<snippet>``) is on the way;
* it is raised in the process and thread that installed the guard (not a forked child, not a thread);
* the modules the trusted code calls into (``watched``: the trusted module's globals, ``builtins``, ``json``, ...)
  still hold the objects they held at installation, their functions the same code and defaults (``rp.check`` asks
  for this check at any time).

The hook's state (the sink, the snapshot, a per-run nonce) lives in its closure. No frame of it is ever seen by
other code: it never raises. Anything it refuses ends the process at once (exit status :data:`GUARD_EXIT`, the
reason on stderr, prefixed ``[rp-guard]``), so a refused attempt can never be caught and retried. Refused, besides
a record that fails the rules above:

* reading or writing another process's memory or descriptors, or this one's (``/proc/<pid>/mem``, ``fd``, ...,
  ``/dev/fd``, changing into ``/proc``); ``ctypes``; ``gc``'s object walks; ``sys.settrace``/``setprofile`` and
  ``sys._current_frames``; more audit hooks;
* making code or functions that pass for the trusted file's (``compile``, ``exec``, ``code.__new__``,
  ``function.__new__`` with its file name; changing a trusted function's ``__code__`` or defaults);
* opening, renaming or linking a file with a protected name (``protected``: the record's own file);
* starting a program (``subprocess``, ``os.exec*``, ``os.posix_spawn``, ``os.system``): it would run without this hook;
  save those named in ``programs`` (a proof's ``grep``), started without a shell.
"""

import builtins
import os
import sys

#: The exit status of a process the guard ended.
GUARD_EXIT = 86
#: The event the trusted code raises to write its record (``sys.audit(RECORD_EVENT, text)``).
RECORD_EVENT = "rp.record"
#: The event that checks the snapshot now (``sys.audit(CHECK_EVENT)``).
CHECK_EVENT = "rp.check"
_DENIED = frozenset(
    "gc.get_objects gc.get_referrers gc.get_referents sys._current_frames sys.settrace sys.setprofile sys.addaudithook "
    "subprocess.Popen os.exec os.posix_spawn os.spawn os.system os.forkpty pty.spawn".split()
)
_PROC_PARTS = frozenset("mem fd fdinfo map_files pagemap environ cwd root task".split())


def _rp_guard_install(trusted, sink, *, entry=None, protected=(), watched=(), programs=()):
    """Install the guard (see the module docstring); returns nothing.

    Args:
        trusted: The trusted file's name as its code objects carry it (``co_filename``).
        sink: ``("fd", descriptor, prefix_bytes)``: each record is written there as one line, after ``prefix_bytes``;
            or ``("file", name)``: each record replaces the file ``name`` (the working directory's).
        entry: A prefix of the entry function's name (``test_option_``); the frames above it are not checked. None:
            every frame of the stack must be the trusted file's.
        protected: File names (last part) that no code may open, rename or link but the hook itself.
        watched: Modules whose namespaces (and the classes and functions in them) must not change.
        programs: Programs that may be started (``grep``: the environment-variable atom's search), by the last part
            of their name, without a shell. A program cannot write a file that these name: ``grep`` writes none.
    """
    getframe, write, open_, close, getpid, exit_ = sys._getframe, os.write, os.open, os.close, os.getpid, os._exit
    get_ident, fspath, getcwd = __import__("_thread").get_ident, os.fspath, os.getcwd
    isinstance_, type_, len_, tuple_, list_, str_, bytes_, int_ = isinstance, type, len, tuple, list, str, bytes, int
    function_type, code_type = type_(_rp_guard_install), type_(_rp_guard_install.__code__)
    vars_, getattr_, exception = builtins.vars, builtins.getattr, Exception
    record_event, check_event, denied, proc_parts, guard_exit = RECORD_EVENT, CHECK_EVENT, _DENIED, _PROC_PARTS, GUARD_EXIT
    pid, thread = getpid(), get_ident()
    protected, programs = frozenset(protected), frozenset(programs)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    busy = [False]
    immutable_type = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE

    registry = "__warningregistry__"  # what the warnings machinery adds to a module's globals: not a change

    def snapshot():
        taken = []
        for module in watched:
            space = vars_(module)
            taken.append((space, tuple_(item for item in space.items() if item[0] != registry)))
            for value in tuple_(space.values()):
                mutable = isinstance_(value, type_) and not value.__flags__ & immutable_type  # a built-in type cannot change
                if mutable and getattr_(value, "__module__", None) == space.get("__name__"):
                    inner = vars_(value)
                    taken.append((inner, tuple_(inner.items())))
                if isinstance_(value, function_type):
                    taken.append((value, (value.__code__, value.__defaults__, value.__kwdefaults__)))
        return tuple_(taken)

    taken = snapshot()

    def changed():
        for space, items in taken:
            if isinstance_(space, function_type):
                code, defaults, kwdefaults = items
                if space.__code__ is not code or space.__defaults__ is not defaults or space.__kwdefaults__ is not kwdefaults:
                    return "the function " + str_(space.__qualname__) + " was changed"
                continue
            # the warnings machinery adds ``__warningregistry__`` to the globals of the frame a warning is reported
            # from (a coroutine never awaited, collected in the observer's frame): the interpreter's, not a change
            if len_(space) - (registry in space) != len_(items):
                return "a namespace of the observer was changed (" + str_(len_(items)) + " -> " + str_(len_(space)) + " names)"
            for key, value in items:
                if space.get(key, space) is not value:
                    return "the name " + str_(key) + " was replaced"
        return None

    def deny(why):
        try:
            write(2, ("\n[rp-guard] refused: " + why + "\n").encode("utf-8", "replace"))
        finally:
            exit_(guard_exit)

    def path_text(path):
        if isinstance_(path, int_):
            return None
        try:
            path = fspath(path)
        except exception:
            return None
        if isinstance_(path, bytes_):
            path = path.decode("utf-8", "replace")
        if not path.startswith("/"):
            path = getcwd() + "/" + path
        parts = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(part)
        return "/" + "/".join(parts)

    def forbidden_path(path):
        text = path_text(path)
        if text is None:
            return None
        parts = text.split("/")[1:]
        if parts and parts[-1] in protected:
            return "a protected file: " + text
        if len_(parts) >= 2 and parts[0] == "dev" and parts[1] in ("fd", "stdin", "stdout", "stderr"):
            return "a descriptor through " + text
        if parts and parts[0] == "proc" and len_(parts) >= 2:
            owner = parts[1]
            if owner in ("self", "thread-self") or owner.isdigit():
                rest = parts[2:]
                if len_(rest) >= 2 and rest[0] == "task":
                    rest = rest[2:]
                if not rest or rest[0] in proc_parts:
                    return "a process's memory or descriptors: " + text
        return None

    def trusted_stack(frame):
        while frame is not None:
            code = frame.f_code
            if code.co_filename != trusted:
                return "the record is asked for by code of " + str_(code.co_filename) + " (" + str_(code.co_name) + ")"
            if entry is not None and code.co_name.startswith(entry):
                return None
            frame = frame.f_back
        return None if entry is None else "the record is asked for outside " + entry + "*"

    def record(text):
        if getpid() != pid or get_ident() != thread:
            deny("a record asked for by another process or thread")
        why = trusted_stack(getframe(2))  # 0: this function, 1: the hook, 2: the caller of sys.audit
        if why is None:
            why = changed()
        if why is not None:
            deny(why)
        if not isinstance_(text, str_):
            deny("a record that is not text")
        data = text.encode("utf-8", "replace")
        busy[0] = True
        try:
            if sink[0] == "fd":
                data = sink[2] + data + b"\n"
                while data:
                    data = data[write(sink[1], data) :]
            else:
                fd = open_(sink[1], flags, 0o644)
                try:
                    while data:
                        data = data[write(fd, data) :]
                finally:
                    close(fd)
        finally:
            busy[0] = False

    def hook(event, args):
        if busy[0] and get_ident() == thread:
            return
        if event == record_event:
            record(args[0] if len_(args) == 1 else None)
        elif event == check_event:
            why = changed()
            if why is not None:
                deny(why)
        elif event == "subprocess.Popen" and programs:
            program = args[0] if args[0] is not None else (args[1][0] if isinstance_(args[1], (list_, tuple_)) and args[1] else args[1])
            if not isinstance_(program, str_) or program.rpartition("/")[2] not in programs:
                deny("starting the program " + str_(program)[:80])
        elif event in denied or event.startswith("ctypes."):
            deny(event)
        elif event == "open":
            why = forbidden_path(args[0])
            if why is not None:
                deny("open of " + why)
        elif event in ("os.rename", "os.link", "os.symlink"):
            for path in args[:2]:
                why = forbidden_path(path)
                if why is not None:
                    deny(event + " of " + why)
        elif event == "os.chdir":
            text = path_text(args[0])
            if text is None or text == "/proc" or text.startswith("/proc/") or text.startswith("/dev/fd"):
                deny("os.chdir into " + str_(args[0]))
        elif event == "compile":
            if len_(args) >= 2 and args[1] == trusted:
                deny("compiling code under the trusted file's name")
        elif event == "exec" or event == "function.__new__":
            if getattr_(args[0], "co_filename", None) == trusted:
                deny(event + " of code under the trusted file's name")
        elif event == "code.__new__":
            if len_(args) >= 2 and args[1] == trusted:
                deny("making code under the trusted file's name")
        elif event == "object.__setattr__":
            target, name = args[0], args[1]
            if isinstance_(target, function_type) and name in ("__code__", "__defaults__", "__kwdefaults__"):
                value = args[2] if len_(args) > 2 else None
                if target.__code__.co_filename == trusted or (isinstance_(value, code_type) and value.co_filename == trusted):
                    deny("changing " + name + " of trusted code")

    sys.addaudithook(hook)
