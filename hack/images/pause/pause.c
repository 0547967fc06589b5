/*
 * pause: the process that holds a pod sandbox's namespaces. It sleeps until SIGTERM or SIGINT
 * and exits 0 then, so a sandbox stops at once instead of waiting out a kill timeout, and it
 * reaps the zombies of a pod that shares its PID namespace. Built static (gcc -static) so the
 * image needs nothing but this file.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) {
	(void)sig;
	_exit(0);
}

static void on_child(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	struct sigaction term = {.sa_handler = on_term};
	struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
	if (getpid() != 1) {
		/* Not an error, as in the upstream pause: it only warns. */
		write(2, "pause: not running as PID 1\n", 28);
	}
	if (sigaction(SIGTERM, &term, NULL) < 0 || sigaction(SIGINT, &term, NULL) < 0 ||
	    sigaction(SIGCHLD, &child, NULL) < 0) {
		return 1;
	}
	for (;;) {
		pause();
	}
}
