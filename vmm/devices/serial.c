// SPDX-License-Identifier: Apache-2.0
/*
 * serial.c - 16550A UART; see serial.h for the model.
 *
 * Interrupt sources, highest priority first, as IIR reports them: received
 * data available, THR empty, modem status change.  Line status errors never
 * happen (no overrun: serial_receive refuses what does not fit).  The output
 * pin is gated by MCR.OUT2 as on every PC, which the 8250 driver depends on:
 * it leaves OUT2 low while it probes with interrupts enabled in IER.
 */
#include "vmm/devices/serial.h"

#include <stdio.h>
#include <string.h>

#include "vmm/devices/device_state.h"
#include "common/log.h"

/* Register offsets; DLL/DLM replace RBR/THR and IER while LCR.DLAB is set. */
#define UART_RBR_THR 0
#define UART_IER 1
#define UART_IIR_FCR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define IER_RDI 0x01
#define IER_THRI 0x02
#define IER_MSI 0x08
/* Bits 4-7 are chip extensions (UUE on Xscale, sleep on 16750): a 16550A
 * reads them as zero, and autoconfig checks exactly that. */
#define IER_MASK 0x0f

#define IIR_NO_INT 0x01
#define IIR_MSI 0x00
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO_ENABLED 0xc0

#define FCR_ENABLE_FIFO 0x01
#define FCR_CLEAR_RCVR 0x02

#define LCR_DLAB 0x80

#define MCR_DTR 0x01
#define MCR_RTS 0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10
#define MCR_MASK 0x1f

#define LSR_DR 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40

#define MSR_DCTS 0x01
#define MSR_DDSR 0x02
#define MSR_TERI 0x04
#define MSR_DDCD 0x08
#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_RI 0x40
#define MSR_DCD 0x80
#define MSR_DELTA_MASK (MSR_DCTS | MSR_DDSR | MSR_TERI | MSR_DDCD)

int serial_init(struct serial *serial, struct irq_line irq, serial_sink_fn sink,
		void *sink_ctx)
{
	int err;

	if (!sink) {
		log_error("serial: no output sink given");
		return -1;
	}
	memset(serial, 0, sizeof(*serial));
	err = pthread_mutex_init(&serial->lock, NULL);
	if (err) {
		log_error("serial: pthread_mutex_init: %s", strerror(err));
		return -1;
	}
	serial->irq = irq;
	serial->sink = sink;
	serial->sink_ctx = sink_ctx;
	return 0;
}

void serial_destroy(struct serial *serial)
{
	serial_flush(serial);
	pthread_mutex_destroy(&serial->lock);
}

/*
 * Modem input lines.  With nothing attached the host side behaves like a
 * connected, ready modem, so the driver never waits for carrier or CTS.  In
 * loopback the outputs are wired back to the inputs (the autoconfig test).
 */
static uint8_t modem_status(const struct serial_state *s)
{
	uint8_t status = 0;

	if (!(s->mcr & MCR_LOOP))
		return MSR_DCD | MSR_DSR | MSR_CTS;
	if (s->mcr & MCR_RTS)
		status |= MSR_CTS;
	if (s->mcr & MCR_DTR)
		status |= MSR_DSR;
	if (s->mcr & MCR_OUT1)
		status |= MSR_RI;
	if (s->mcr & MCR_OUT2)
		status |= MSR_DCD;
	return status;
}

static void write_mcr(struct serial_state *s, uint8_t value)
{
	uint8_t before = modem_status(s);
	uint8_t after;
	uint8_t changed;

	s->mcr = value & MCR_MASK;
	after = modem_status(s);
	changed = before ^ after;
	if (changed & MSR_CTS)
		s->msr_delta |= MSR_DCTS;
	if (changed & MSR_DSR)
		s->msr_delta |= MSR_DDSR;
	if ((before & MSR_RI) && !(after & MSR_RI))
		s->msr_delta |= MSR_TERI;
	if (changed & MSR_DCD)
		s->msr_delta |= MSR_DDCD;
}

static uint8_t highest_pending_interrupt(const struct serial_state *s)
{
	if ((s->ier & IER_RDI) && s->rx_count)
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thr_empty_pending)
		return IIR_THRI;
	if ((s->ier & IER_MSI) && s->msr_delta)
		return IIR_MSI;
	return IIR_NO_INT;
}

static void update_irq(struct serial *serial)
{
	const struct serial_state *s = &serial->state;

	irq_line_set(&serial->irq, highest_pending_interrupt(s) != IIR_NO_INT &&
					   (s->mcr & MCR_OUT2));
}

static void flush_output(struct serial *serial)
{
	if (serial->output_len) {
		serial->sink(serial->sink_ctx, serial->output,
			     serial->output_len);
		serial->output_len = 0;
	}
}

static void transmit(struct serial *serial, uint8_t byte)
{
	struct serial_state *s = &serial->state;

	/* Loopback disconnects the transmitter from the line.  Not feeding
	 * the byte back into the receiver is a deviation, and deliberate:
	 * autoconfig's size_fifo() would then count our deep RX FIFO and
	 * misdetect the UART as a 64-byte-FIFO U6_16550A. */
	if (!(s->mcr & MCR_LOOP)) {
		serial->output[serial->output_len++] = byte;
		if (byte == '\n' ||
		    serial->output_len == SERIAL_OUTPUT_BUFFER_SIZE)
			flush_output(serial);
	}
	/* The byte left at once, so THR is empty again. */
	s->thr_empty_pending = true;
}

static uint8_t receive_byte(struct serial_state *s)
{
	uint8_t byte;

	if (!s->rx_count)
		return 0;
	byte = s->rx_fifo[s->rx_head];
	s->rx_head = (s->rx_head + 1) % SERIAL_RX_FIFO_SIZE;
	s->rx_count--;
	return byte;
}

static void write_fcr(struct serial_state *s, uint8_t value)
{
	bool enable = value & FCR_ENABLE_FIFO;

	/* Toggling the FIFO enable empties the FIFOs on real parts too. */
	if ((value & FCR_CLEAR_RCVR) || enable != s->fifo_enabled) {
		s->rx_head = 0;
		s->rx_count = 0;
	}
	s->fifo_enabled = enable;
}

static void write_ier(struct serial_state *s, uint8_t value)
{
	uint8_t old = s->ier;

	s->ier = value & IER_MASK;
	/* THR is always empty, so enabling THRI raises it at once; the 8250
	 * driver's THRE test relies on this re-assertion after it cleared
	 * the interrupt by reading IIR. */
	if ((s->ier ^ old) & IER_THRI)
		s->thr_empty_pending = s->ier & IER_THRI;
}

static void write_register(struct serial *serial, uint64_t offset,
			   uint8_t value)
{
	struct serial_state *s = &serial->state;
	bool dlab = s->lcr & LCR_DLAB;

	switch (offset) {
	case UART_RBR_THR:
		if (dlab)
			s->dll = value;
		else
			transmit(serial, value);
		break;
	case UART_IER:
		if (dlab)
			s->dlm = value;
		else
			write_ier(s, value);
		break;
	case UART_IIR_FCR:
		write_fcr(s, value);
		break;
	case UART_LCR:
		s->lcr = value;
		break;
	case UART_MCR:
		write_mcr(s, value);
		break;
	case UART_SCR:
		s->scr = value;
		break;
	default:
		/* LSR and MSR are read-only (writes are factory test modes). */
		break;
	}
}

static uint8_t read_register(struct serial *serial, uint64_t offset)
{
	struct serial_state *s = &serial->state;
	bool dlab = s->lcr & LCR_DLAB;
	uint8_t value;

	switch (offset) {
	case UART_RBR_THR:
		return dlab ? s->dll : receive_byte(s);
	case UART_IER:
		return dlab ? s->dlm : s->ier;
	case UART_IIR_FCR:
		value = highest_pending_interrupt(s);
		/* Reading IIR is how a THR-empty interrupt is acknowledged. */
		if (value == IIR_THRI)
			s->thr_empty_pending = false;
		return value | (s->fifo_enabled ? IIR_FIFO_ENABLED : 0);
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		return LSR_THRE | LSR_TEMT | (s->rx_count ? LSR_DR : 0);
	case UART_MSR:
		value = modem_status(s) | s->msr_delta;
		s->msr_delta = 0;
		return value;
	case UART_SCR:
		return s->scr;
	default:
		return 0xff;
	}
}

void serial_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
	       bool is_write)
{
	struct serial *serial = device;

	pthread_mutex_lock(&serial->lock);
	/* A wide access reaches consecutive byte registers, as on ISA. */
	for (uint32_t i = 0; i < len; i++) {
		if (is_write)
			write_register(serial, offset + i, data[i]);
		else
			data[i] = read_register(serial, offset + i);
	}
	update_irq(serial);
	pthread_mutex_unlock(&serial->lock);
}

size_t serial_receive(struct serial *serial, const uint8_t *buf, size_t len)
{
	struct serial_state *s = &serial->state;
	size_t accepted = 0;

	pthread_mutex_lock(&serial->lock);
	while (accepted < len && s->rx_count < SERIAL_RX_FIFO_SIZE) {
		s->rx_fifo[(s->rx_head + s->rx_count) % SERIAL_RX_FIFO_SIZE] =
			buf[accepted++];
		s->rx_count++;
	}
	update_irq(serial);
	pthread_mutex_unlock(&serial->lock);
	return accepted;
}

void serial_flush(struct serial *serial)
{
	pthread_mutex_lock(&serial->lock);
	flush_output(serial);
	pthread_mutex_unlock(&serial->lock);
}

void serial_save(struct serial *serial, struct state_writer *w)
{
	pthread_mutex_lock(&serial->lock);
	state_put(w, STATE_DEV_SERIAL, 0, &serial->state,
		  sizeof(serial->state));
	pthread_mutex_unlock(&serial->lock);
}

/* Copies section @raw into @s if it is a state the UART can be in. */
static bool load_state(const uint8_t *raw, struct serial_state *s)
{
	if (!STATE_BOOL_VALID(raw, struct serial_state, fifo_enabled,
			      "serial") ||
	    !STATE_BOOL_VALID(raw, struct serial_state, thr_empty_pending,
			      "serial"))
		return false;
	memcpy(s, raw, sizeof(*s));
	if (s->rx_head >= SERIAL_RX_FIFO_SIZE) {
		log_error("snapshot state: serial rx_head %u is outside the "
			  "%d-byte FIFO",
			  s->rx_head, SERIAL_RX_FIFO_SIZE);
		return false;
	}
	if (s->rx_count > SERIAL_RX_FIFO_SIZE) {
		log_error("snapshot state: serial rx_count %u exceeds the "
			  "%d-byte FIFO",
			  s->rx_count, SERIAL_RX_FIFO_SIZE);
		return false;
	}
	return state_bits_valid(s->ier, IER_MASK, "serial", "ier") &&
	       state_bits_valid(s->mcr, MCR_MASK, "serial", "mcr") &&
	       state_bits_valid(s->msr_delta, MSR_DELTA_MASK, "serial",
				"msr_delta");
}

int serial_restore(struct serial *serial, const struct state_reader *r)
{
	uint8_t raw[sizeof(struct serial_state)];
	struct serial_state s;

	if (state_get(r, STATE_DEV_SERIAL, 0, raw, sizeof(raw)) ||
	    !load_state(raw, &s))
		return -1;
	pthread_mutex_lock(&serial->lock);
	serial->state = s;
	irq_line_forget(&serial->irq);
	update_irq(serial);
	pthread_mutex_unlock(&serial->lock);
	return 0;
}
