/*
 * cc_run.c -- the launcher that full-system capture (crates/capture/src/system.rs) runs as the
 * guest's PID 1 (the initramfs /init script execs it once the guest is up):
 *
 *     cc_run PROGRAM ARGS...
 *
 * 1. prints "@@CC KTEXT stext=N etext=N switch=N dead=N@@" (decimal): the kernel text's bounds
 *    and the addresses of __switch_to_asm and do_task_dead from /proc/kallsyms (Debian's
 *    /boot/System.map is a placeholder), for the tests' address-range check and the host's
 *    task tracking (src/tasks.rs), and waits until the console has sent it (tcdrain: the host
 *    reads it when the region's first record arrives);
 * 2. prints "@@CC BOOTED@@" on the console (the host's boot watchdog waits for it);
 * 3. forks; the child writes "ccstart" to ftrace's trace_marker (the init script enabled the
 *    scheduler's sched_switch and sched_process_fork events), executes the start magic
 *    instruction `xchg %bx,%bx` and execvp()s the program, so the traced region begins with the
 *    program's own execve (boot is excluded); if execvp fails the child prints
 *    "@@CC EXECFAIL <errno>@@" and exits with 127;
 * 4. the parent waits for the child with WNOWAIT (it stays a zombie, its accounting readable),
 *    executes the stop magic `xchg %cx,%cx` (shutdown is excluded), writes "ccstop" to the
 *    trace_marker, reads utime and stime (fields 14 and 15 of /proc/PID/stat, in clock ticks);
 * 5. prints the scheduler events between the marks ("@@CC TASKS BEGIN@@", the ftrace lines,
 *    "@@CC TASKS END@@"), from which the host labels the trace's tasks with pids;
 * 6. prints "@@CC STAT status=S utime=U stime=T hz=H@@", the guest kernel's own accounting
 *    against which the tests check the trace's privileged share;
 * 7. reaps the child and powers the guest off (reboot(2)), which ends QEMU.
 *
 * The magic instructions are architectural no-ops (exchanging a register with itself) that no
 * compiler emits; the system-mode plugin (qemu-plugin/cachecolor_system.c) acts on them only at
 * user addresses. Built statically by build.rs (no library needed in the guest for it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/reboot.h>
#include <termios.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACING "/sys/kernel/tracing/"

/* Write `text` to ftrace's trace_marker (nothing if tracing is unavailable). */
static void trace_mark(const char *text)
{
    int fd = open(TRACING "trace_marker", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t w = write(fd, text, strlen(text));
        (void)w;
        close(fd);
    }
}

/* The kernel symbols the host needs, from /proc/kallsyms (0 when absent). */
static void kernel_symbols(void)
{
    unsigned long long stext = 0, etext = 0, sw = 0, dead = 0;
    char line[512];
    FILE *f = fopen("/proc/kallsyms", "r");
    while (f && fgets(line, sizeof(line), f) && !(stext && etext && sw && dead)) {
        unsigned long long a;
        char type, name[256];
        if (sscanf(line, "%llx %c %255s", &a, &type, name) == 3) {
            if (!strcmp(name, "_stext")) {
                stext = a;
            } else if (!strcmp(name, "_etext")) {
                etext = a;
            } else if (!strcmp(name, "__switch_to_asm")) {
                sw = a;
            } else if (!strcmp(name, "do_task_dead")) {
                dead = a;
            }
        }
    }
    if (f) {
        fclose(f);
    }
    printf("@@CC KTEXT stext=%llu etext=%llu switch=%llu dead=%llu@@\n", stext, etext, sw, dead);
    tcdrain(STDOUT_FILENO);
}

/* The scheduler events ftrace recorded (only the lines the host parses). */
static void dump_tasks(void)
{
    int fd = open(TRACING "tracing_on", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t w = write(fd, "0", 1);
        (void)w;
        close(fd);
    }
    printf("@@CC TASKS BEGIN@@\n");
    FILE *f = fopen(TRACING "trace", "r");
    char line[1024];
    while (f && fgets(line, sizeof(line), f)) {
        if (strstr(line, " sched_switch: ") || strstr(line, " sched_process_fork: ")
            || strstr(line, "tracing_mark_write: cc")) {
            fputs(line, stdout);
        }
    }
    if (f) {
        fclose(f);
    }
    printf("@@CC TASKS END@@\n");
}

static void power_off(void)
{
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    _exit(1); /* not reached as PID 1 with CAP_SYS_BOOT; a panic then ends QEMU (panic=-1) */
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) {
        printf("@@CC EXECFAIL %d@@\n", EINVAL);
        power_off();
    }
    kernel_symbols();
    printf("@@CC BOOTED@@\n");
    pid_t pid = fork();
    if (pid < 0) {
        printf("@@CC FORKFAIL %d@@\n", errno);
        power_off();
    }
    if (pid == 0) {
        trace_mark("ccstart");
        __asm__ volatile("xchg %%bx, %%bx" ::: "memory");
        execvp(argv[1], argv + 1);
        int e = errno;
        printf("@@CC EXECFAIL %d@@\n", e);
        _exit(127);
    }
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    __asm__ volatile("xchg %%cx, %%cx" ::: "memory");
    trace_mark("ccstop");

    unsigned long utime = 0, stime = 0;
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f && fgets(line, sizeof(line), f)) {
        /* Fields after the command name (which may hold spaces) start after the last ')'. */
        char *p = strrchr(line, ')');
        if (p) {
            /* p+2 is field 3 (state); utime and stime are fields 14 and 15. */
            char *tok = strtok(p + 2, " ");
            for (int field = 3; tok && field <= 15; field++, tok = strtok(NULL, " ")) {
                if (field == 14) {
                    utime = strtoul(tok, NULL, 10);
                } else if (field == 15) {
                    stime = strtoul(tok, NULL, 10);
                }
            }
        }
    }
    if (f) {
        fclose(f);
    }
    dump_tasks();
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("@@CC STAT status=%d utime=%lu stime=%lu hz=%ld@@\n", code, utime, stime,
           sysconf(_SC_CLK_TCK));
    power_off();
    return 0;
}
