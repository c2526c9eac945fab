/* Option parsing for the pyramesh CLI. Numbers go through strtod/strtoll
 * and must be consumed whole, so "--iso abc" or "-r 1x" is a usage error
 * that names the option, never a silent zero. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

void cli_args_init(cli_args *a, const char *cmd, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->argc = argc;
    a->argv = argv;
    a->i = 1; /* argv[0] is the command name */
    a->cmd = cmd;
}

static void set_name(cli_args *a, const char *prefix, const char *name, size_t len)
{
    if (len > sizeof a->name_buf - 4) len = sizeof a->name_buf - 4;
    snprintf(a->name_buf, sizeof a->name_buf, "%s%.*s", prefix, (int)len, name);
    a->name = a->name_buf;
}

/* The words a CLI_SWITCH takes as its value from the next argument. */
static int switch_word(const char *s)
{
    static const char *const words[] = {"on",      "off",   "none", "forward",
                                        "central", "sobel", "area", "sph"};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (strcasecmp(s, words[k]) == 0) return 1;
    return 0;
}

/* Whether s reads as one number (a coordinate of a CLI_TRIPLE). */
static int is_number(const char *s)
{
    char *end = NULL;
    if (!*s || isspace((unsigned char)s[0])) return 0;
    (void)strtod(s, &end);
    return end != s && *end == '\0';
}

static const cli_option *find_short(const cli_option *opts, char c)
{
    const cli_option *o = NULL;
    for (const cli_option *p = opts; p->id; p++)
        if (p->short_name && p->short_name == c) o = p;
    return o;
}

/* Whether every character of s is a short option without a value. */
static int all_flags(const cli_option *opts, const char *s)
{
    for (; *s; s++) {
        const cli_option *o = find_short(opts, *s);
        if (!o || o->has_arg) return 0;
    }
    return 1;
}

int cli_args_next(cli_args *a, const cli_option *opts, const char **value)
{
    *value = NULL;
    if (a->pending && *a->pending) { /* the next flag of a group "-vq" */
        const cli_option *o = find_short(opts, *a->pending);
        set_name(a, "-", a->pending, 1);
        a->pending++;
        return o->id; /* all_flags checked the group */
    }
    a->pending = NULL;
    if (a->i >= a->argc) return CLI_ARG_END;
    char *arg = a->argv[a->i++];
    if (a->only_positional || arg[0] != '-' || arg[1] == '\0') {
        *value = arg;
        return CLI_ARG_POSITIONAL;
    }
    if (strcmp(arg, "--") == 0) {
        a->only_positional = 1;
        return cli_args_next(a, opts, value);
    }
    const cli_option *o = NULL;
    const char *inline_value = NULL;
    if (arg[1] == '-') {
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        set_name(a, "--", name, len);
        for (const cli_option *p = opts; p->id; p++)
            if (p->long_name && strlen(p->long_name) == len &&
                strncmp(p->long_name, name, len) == 0)
                o = p;
        if (!o) {
            cli_usage_error(a->cmd, "unknown option '%s'", a->name);
            return CLI_ARG_BAD;
        }
        if (eq) inline_value = eq + 1;
    } else {
        set_name(a, "-", arg + 1, 1);
        o = find_short(opts, arg[1]);
        if (!o) {
            cli_usage_error(a->cmd, "unknown option '%s'", a->name);
            return CLI_ARG_BAD;
        }
        if (arg[2]) {
            if (!o->has_arg) {
                /* A group of flags ("-vv", "-qv"), else an error. */
                if (arg[2] != '=' && all_flags(opts, arg + 2)) {
                    a->pending = arg + 2;
                    return o->id;
                }
                cli_usage_error(a->cmd, "option '%s' takes no value (got '%s')", a->name, arg);
                return CLI_ARG_BAD;
            }
            /* "-r0.025" and clap's "-r=0.025" */
            inline_value = arg[2] == '=' ? arg + 3 : arg + 2;
        }
    }
    if (!o->has_arg) {
        if (inline_value) {
            cli_usage_error(a->cmd, "option '%s' takes no value", a->name);
            return CLI_ARG_BAD;
        }
        return o->id;
    }
    if (o->has_arg == CLI_SWITCH) {
        if (inline_value)
            *value = inline_value;
        else if (a->i < a->argc && switch_word(a->argv[a->i]))
            *value = a->argv[a->i++];
        else
            *value = "on"; /* "--normals" alone */
        return o->id;
    }
    if (inline_value) {
        *value = inline_value;
    } else {
        /* The value may start with '-' (a negative iso value). */
        if (a->i >= a->argc) {
            cli_usage_error(a->cmd, "option '%s' needs a value", a->name);
            return CLI_ARG_BAD;
        }
        *value = a->argv[a->i++];
    }
    if (o->has_arg == CLI_TRIPLE && !strchr(*value, ',') && is_number(*value)) {
        /* "X Y Z" as three arguments: join them as "X,Y,Z". */
        if (a->i + 2 > a->argc || !is_number(a->argv[a->i]) || !is_number(a->argv[a->i + 1])) {
            cli_usage_error(a->cmd, "option '%s' needs three numbers X Y Z (or X,Y,Z), got '%s'",
                            a->name, *value);
            return CLI_ARG_BAD;
        }
        int k = snprintf(a->value_buf, sizeof a->value_buf, "%s,%s,%s", *value, a->argv[a->i],
                         a->argv[a->i + 1]);
        if (k < 0 || (size_t)k >= sizeof a->value_buf) {
            cli_usage_error(a->cmd, "option '%s': numbers too long", a->name);
            return CLI_ARG_BAD;
        }
        a->i += 2;
        *value = a->value_buf;
    }
    return o->id;
}

int cli_parse_switch(const char *cmd, const char *opt, const char *s, int *out)
{
    if (strcasecmp(s, "on") == 0) {
        *out = 1;
        return 1;
    }
    if (strcasecmp(s, "off") == 0) {
        *out = 0;
        return 1;
    }
    cli_usage_error(cmd, "%s expects on or off (%s=on, %s=off), got '%s'", opt, opt, opt, s);
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || isspace((unsigned char)s[0]) || !isfinite(v) ||
        errno == ERANGE) {
        cli_usage_error(cmd, "%s expects a finite number, got '%s'", opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_positive(const char *cmd, const char *opt, const char *s, double *out)
{
    if (!cli_parse_double(cmd, opt, s, out)) return 0;
    if (!(*out > 0)) {
        cli_usage_error(cmd, "%s must be positive, got '%s'", opt, s);
        return 0;
    }
    return 1;
}

int cli_parse_int(const char *cmd, const char *opt, const char *s, long long min, long long max,
                  long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || isspace((unsigned char)s[0]) || errno == ERANGE) {
        cli_usage_error(cmd, "%s expects an integer, got '%s'", opt, s);
        return 0;
    }
    if (v < min || v > max) {
        cli_usage_error(cmd, "%s must be between %lld and %lld, got '%s'", opt, min, max, s);
        return 0;
    }
    *out = v;
    return 1;
}

/* Splits "a,b,c" into exactly three fields. */
static int split3(const char *s, char parts[3][64])
{
    const char *p = s;
    for (int k = 0; k < 3; k++) {
        const char *c = strchr(p, ',');
        if ((k < 2) != (c != NULL)) return 0;
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= 64) return 0;
        memcpy(parts[k], p, len);
        parts[k][len] = '\0';
        p = c ? c + 1 : p + len;
    }
    return 1;
}

int cli_parse_triple(const char *cmd, const char *opt, const char *s, double out[3])
{
    char parts[3][64];
    char *end;
    if (split3(s, parts)) {
        int ok = 1;
        for (int k = 0; k < 3 && ok; k++) {
            errno = 0;
            out[k] = strtod(parts[k], &end);
            ok = end != parts[k] && *end == '\0' && isfinite(out[k]) && errno != ERANGE &&
                 !isspace((unsigned char)parts[k][0]);
        }
        if (ok) return 1;
    }
    cli_usage_error(cmd, "%s expects three numbers X,Y,Z, got '%s'", opt, s);
    return 0;
}

int cli_parse_dims(const char *cmd, const char *opt, const char *s, size_t out[3])
{
    char parts[3][64];
    char *end;
    if (split3(s, parts)) {
        int ok = 1;
        for (int k = 0; k < 3 && ok; k++) {
            errno = 0;
            unsigned long long v = strtoull(parts[k], &end, 10);
            ok = end != parts[k] && *end == '\0' && errno != ERANGE &&
                 isdigit((unsigned char)parts[k][0]) && v >= 1 && v <= SIZE_MAX;
            out[k] = (size_t)v;
        }
        if (ok) return 1;
    }
    cli_usage_error(cmd, "%s expects three positive integers NX,NY,NZ, got '%s'", opt, s);
    return 0;
}

int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || isspace((unsigned char)s[0]) || !isfinite(v) || v < 0 || errno == ERANGE)
        goto bad;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') goto bad;
    double bytes = floor(v * mult);
    /* 2^64 is exactly representable; anything at or above it does not fit. */
    if (!(bytes < 18446744073709551616.0)) goto bad;
    *out = (uint64_t)bytes;
    return 1;
bad:
    cli_usage_error(cmd, "%s expects a size such as 4096, 512M or 8G, got '%s'", opt, s);
    return 0;
}

int cli_parse_choice(const char *cmd, const char *opt, const char *s, const char *const *words,
                     int *out)
{
    for (int k = 0; words[k]; k++)
        if (strcmp(s, words[k]) == 0) {
            *out = k;
            return 1;
        }
    char list[256] = "";
    for (int k = 0; words[k]; k++) {
        if (k) strncat(list, "|", sizeof list - strlen(list) - 1);
        strncat(list, words[k], sizeof list - strlen(list) - 1);
    }
    cli_usage_error(cmd, "%s expects one of %s, got '%s'", opt, list, s);
    return 0;
}
