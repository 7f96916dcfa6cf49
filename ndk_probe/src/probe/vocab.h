/*
 * Lookups over the generated vocabulary (gen/vocabulary.h). Op names, argument names and kinds
 * come only from NPUCONF_OPS; nothing here spells an op by hand.
 */
#ifndef NPUCONF_PROBE_VOCAB_H
#define NPUCONF_PROBE_VOCAB_H

#include <stdbool.h>
#include <stdio.h>

#include "vocabulary.h"

/* The op whose name is `name`, or -1. */
int vocab_op_by_name(const char *name);
/* errno name from the vocabulary, else "E#<n>"; `buf` holds the latter (16 bytes suffice). */
const char *vocab_errno_name(int number, char buf[16]);
/* errno number of a vocabulary name, or -1 when the name is not in the vocabulary. */
int vocab_errno_by_name(const char *name);
/* "SIGSEGV" etc., else "SIG#<n>". */
const char *vocab_signal_name(int sig, char buf[16]);
/* Prints `npuconf-probe --list` (reference_model.vocabulary.PROBE_LIST_LINES). */
void vocab_print_list(FILE *out);

#endif
