/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serial.h - 16550A UART, the guest's console (COM1: 0x3f8, IRQ 4).
 *
 * The model is just deep enough for Linux's 8250 driver: autoconfig
 * recognises a 16550A on the first pass (IER and loopback tests, FIFO bits in
 * IIR, no EFR, no 64-byte FIFO, no Xscale UUE bit), and serial8250_startup's
 * THRE test passes, so the driver uses the transmit interrupt instead of a
 * polling timer.  That interrupt is what makes user-space writes to
 * /dev/ttyS0 come out at all.
 *
 * Transmission is instantaneous: the transmitter is always empty (LSR THRE and
 * TEMT always set), and the THR-empty interrupt re-arms on every THR write.
 * Transmitted bytes are collected and handed to the sink a line at a time
 * (or when the buffer fills, or on serial_flush), so a boot log does not cost
 * a host write per character.  Host input is queued with serial_receive into
 * a bounded receive FIFO.
 *
 * Everything the guest can observe lives in struct serial_state, a plain
 * struct that serial_save and serial_restore copy to and from a snapshot;
 * struct serial adds the host-side wiring and output buffer, which are not
 * saved (bytes the guest transmitted are the original machine's).  All
 * entry points take the device mutex, because any vCPU thread may touch the
 * UART and host input arrives from yet another thread.
 */
#ifndef THAW_VMM_DEVICES_SERIAL_H
#define THAW_VMM_DEVICES_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/irq.h"
#include "snapshot/state.h"

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4
#define SERIAL_PORT_COUNT 8

/*
 * Larger than a real 16550A's 16 bytes: Linux drains the FIFO for as long as
 * LSR.DR is set, so a deeper FIFO only means fewer interrupts per paste.
 */
#define SERIAL_RX_FIFO_SIZE 64
#define SERIAL_OUTPUT_BUFFER_SIZE 1024

/* Receives transmitted bytes; called with the device mutex held, so it must
 * not call back into the same serial device. */
typedef void (*serial_sink_fn)(void *ctx, const uint8_t *buf, size_t len);

struct serial_state {
	uint8_t ier;
	uint8_t lcr;
	uint8_t mcr;
	uint8_t scr;
	uint8_t dll;
	uint8_t dlm;
	uint8_t msr_delta; /* MSR bits 0-3, cleared by reading MSR */
	bool fifo_enabled;
	bool thr_empty_pending;
	uint8_t rx_fifo[SERIAL_RX_FIFO_SIZE];
	uint16_t rx_head;
	uint16_t rx_count;
};

struct serial {
	struct serial_state state;
	pthread_mutex_t lock;
	struct irq_line irq;
	serial_sink_fn sink;
	void *sink_ctx;
	uint8_t output[SERIAL_OUTPUT_BUFFER_SIZE];
	size_t output_len;
};

/* Resets the UART to its power-on state.  Returns 0, or -1 with a message. */
int serial_init(struct serial *serial, struct irq_line irq, serial_sink_fn sink,
		void *sink_ctx);

/* Flushes pending output and releases the mutex. */
void serial_destroy(struct serial *serial);

/* bus_access_fn for the 8 ports at SERIAL_COM1_BASE. */
void serial_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
	       bool is_write);

/* Queues host input for the guest; returns how many bytes fit in the FIFO. */
size_t serial_receive(struct serial *serial, const uint8_t *buf, size_t len);

/* Hands buffered output (an unterminated last line) to the sink. */
void serial_flush(struct serial *serial);

/* Adds the guest-visible state as section STATE_DEV_SERIAL, instance 0. */
void serial_save(struct serial *serial, struct state_writer *w);

/* Checks and installs the saved state and re-drives the IRQ line; returns 0,
 * or -1 after a message with the device untouched. */
int serial_restore(struct serial *serial, const struct state_reader *r);

#endif
