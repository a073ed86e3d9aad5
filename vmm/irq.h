/* SPDX-License-Identifier: Apache-2.0 */
/*
 * irq.h - how a device drives its interrupt line.
 *
 * Devices do not know about KVM: they hold an irq_line and report the level
 * they want the line at.  The VMM wires the line to KVM_IRQ_LINE (or, for
 * devices that signal from other threads at high rate, to an irqfd); unit
 * tests wire it to a recorder.  irq_line_set only forwards changes, so a
 * device can call it after every register access without flooding KVM.
 */
#ifndef THAW_VMM_IRQ_H
#define THAW_VMM_IRQ_H

#include <stdint.h>

struct irq_line {
	void (*set_level)(void *ctx, uint32_t gsi, int level);
	void *ctx;
	uint32_t gsi;
	int level;
};

static inline void irq_line_set(struct irq_line *line, int level)
{
	level = !!level;
	if (line->set_level && level != line->level) {
		line->level = level;
		line->set_level(line->ctx, line->gsi, level);
	}
}

#endif
