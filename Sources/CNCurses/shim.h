// The wide-character ncurses API, and functions for what Swift cannot import (macros, globals).
#ifndef HAUL_CNCURSES_SHIM_H
#define HAUL_CNCURSES_SHIM_H

// Before <ncurses.h>: this is what declares get_wch, waddnwstr and friends.
#define NCURSES_WIDECHAR 1

#include <locale.h>
#include <langinfo.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>
#include <stdlib.h>
#include <ncurses.h>
#include <term.h>

enum { HAUL_TERMINAL_OK = 0, HAUL_TERMINAL_UNSET = 1, HAUL_TERMINAL_UNKNOWN = 2, HAUL_TERMINAL_NO_CURSOR = 3 };

/// Whether TERM names a terminal curses can draw on, before anything starts: set, known to
/// terminfo, and able to move its cursor (`cup`; `dumb` cannot).
static inline int haul_check_terminal(void) {
    const char *name = getenv("TERM");
    if (name == NULL || name[0] == '\0') return HAUL_TERMINAL_UNSET;
    int error = 0;
    if (setupterm(name, fileno(stdout), &error) != OK) return HAUL_TERMINAL_UNKNOWN;
    const char *cup = tigetstr("cup");
    int canMove = !(cup == NULL || cup == (char *)-1);
    TERMINAL *checked = cur_term;
    set_curterm(NULL);
    del_curterm(checked);
    return canMove ? HAUL_TERMINAL_OK : HAUL_TERMINAL_NO_CURSOR;
}

/// Reports button 1 presses and the wheel, at once (no click detection delay).
static inline void haul_mouse_on(void) {
    mouseinterval(0);
    mousemask(BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
}

enum { HAUL_MOUSE_NONE = 0, HAUL_MOUSE_CLICK = 1, HAUL_MOUSE_WHEEL_UP = 2, HAUL_MOUSE_WHEEL_DOWN = 3 };

/// After KEY_MOUSE: what the mouse did, and where (a click).
static inline int haul_mouse_event(int *x, int *y) {
    MEVENT event;
    if (getmouse(&event) != OK) return HAUL_MOUSE_NONE;
    *x = event.x;
    *y = event.y;
    if (event.bstate & BUTTON4_PRESSED) return HAUL_MOUSE_WHEEL_UP;
    if (event.bstate & BUTTON5_PRESSED) return HAUL_MOUSE_WHEEL_DOWN;
    if (event.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED)) return HAUL_MOUSE_CLICK;
    return HAUL_MOUSE_NONE;
}

/// Starts curses on stdin/stdout; 0 on success, -1 when the terminal cannot be used (newterm,
/// unlike initscr, returns instead of exiting the process).
static inline int haul_start(void) {
    SCREEN *screen = newterm(NULL, stdout, stdin);
    if (screen == NULL) return -1;
    set_term(screen);
    return 0;
}

static inline int haul_cols(void) { return COLS; }
static inline int haul_lines(void) { return LINES; }

static inline int haul_keypad(void) { return keypad(stdscr, TRUE); }
static inline int haul_intrflush(void) { return intrflush(stdscr, FALSE); }

/// Reads one key; returns OK (a character in *ch), KEY_CODE_YES (a key code in *ch) or ERR.
static inline int haul_get_wch(unsigned int *ch) {
    wint_t value = 0;
    int result = wget_wch(stdscr, &value);
    *ch = (unsigned int)value;
    return result;
}

enum { HAUL_BOLD = 1, HAUL_REVERSE = 2, HAUL_DIM = 4, HAUL_UNDERLINE = 8 };

/// Sets the attributes of what is drawn next: HAUL_* flags and a colour pair (0 for none).
static inline void haul_style(unsigned int flags, short pair) {
    attr_t attributes = A_NORMAL;
    if (flags & HAUL_BOLD) attributes |= A_BOLD;
    if (flags & HAUL_REVERSE) attributes |= A_REVERSE;
    if (flags & HAUL_DIM) attributes |= A_DIM;
    if (flags & HAUL_UNDERLINE) attributes |= A_UNDERLINE;
    attr_set(attributes, pair, NULL);
}

static inline int haul_draw(int y, int x, const wchar_t *text, int count) {
    return mvaddnwstr(y, x, text, count);
}

static inline int haul_clear_to_eol(void) { return clrtoeol(); }
static inline int haul_move(int y, int x) { return move(y, x); }

/// The next refresh repaints the whole screen (Ctrl-L, or after something scribbled on it).
static inline int haul_repaint_all(void) { return clearok(curscr, TRUE); }

static inline int haul_refresh(void) {
    wnoutrefresh(stdscr);
    return doupdate();
}

/// Whether the locale's character set is UTF-8 (under LC_ALL=C wide output draws nothing).
static inline int haul_locale_is_utf8(void) {
    const char *codeset = nl_langinfo(CODESET);
    return codeset != NULL && (strcmp(codeset, "UTF-8") == 0 || strcmp(codeset, "utf8") == 0);
}

/// A terminfo string capability (`rmcup`, `cnorm`, `sgr0`), or NULL when the terminal has none.
static inline const char *haul_terminfo(const char *name) {
    char *value = tigetstr(name);
    if (value == NULL || value == (char *)-1) return NULL;
    return value;
}

#endif
