/*
 * tools/bench_svg.c — the `folio bench --plot FILE.svg` chart, written by
 * hand (API in bench_core.h).
 *
 * Layout: a title, then panels stacked vertically, each PANEL_H pixels
 * tall, sharing the time axis (seconds).  Each panel has a y axis from 0
 * to a "nice" maximum (1, 2 or 5 times a power of ten) with 5 gridlines
 * and tick labels, an x axis with ticks every nice step, a title with its
 * unit, and a legend naming its series in their colours.  Series are
 * polylines; a NaN value breaks the line.  All text is XML-escaped; the
 * output is one well-formed SVG 1.1 document.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "bench_core.h"

#define W       900
#define PANEL_H 220
#define LEFT    80
#define RIGHT   30
#define TOP     50
#define GAP     40 /* between panels: x tick labels and the next title */

static const char *const colours[BENCH_SVG_MAX_SERIES] = {"#1f77b4", "#d62728", "#2ca02c"};

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

static double nice_ceil(double v)
{
    if (!(v > 0) || !isfinite(v))
        return 1;
    double p = pow(10, floor(log10(v)));
    double m = v / p;
    double n = m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10;
    return n * p;
}

static void fmt_num(char *out, size_t cap, double v)
{
    if (fabs(v) >= 1e6 || (v != 0 && fabs(v) < 1e-3))
        snprintf(out, cap, "%.2g", v);
    else if (v == floor(v))
        snprintf(out, cap, "%.0f", v);
    else
        snprintf(out, cap, "%.3g", v);
}

int bench_svg_write(FILE *f, const char *title, const double *x, size_t n,
                    const struct bench_svg_panel *panels, int n_panels)
{
    int h = TOP + n_panels * (PANEL_H + GAP) + 20;
    double xmax = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && x[i] > xmax)
            xmax = x[i];
    xmax = nice_ceil(xmax);
    double pw = W - LEFT - RIGHT;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
            W, h, W, h, W, h, LEFT);
    esc(f, title);
    fputs("</text>\n", f);
    for (int pi = 0; pi < n_panels; pi++) {
        const struct bench_svg_panel *pn = &panels[pi];
        int y0 = TOP + pi * (PANEL_H + GAP) + 20; /* top of the plot area */
        int ph = PANEL_H - 20;
        double ymax = 0;
        for (int s = 0; s < pn->n_series; s++)
            for (size_t i = 0; i < n; i++)
                if (isfinite(pn->y[s][i]) && pn->y[s][i] > ymax)
                    ymax = pn->y[s][i];
        ymax = nice_ceil(ymax);
        fprintf(f, "<g class=\"panel\">\n<text x=\"%d\" y=\"%d\" font-weight=\"bold\">", LEFT,
                y0 - 8);
        esc(f, pn->title);
        if (pn->unit && *pn->unit) {
            fputs(" (", f);
            esc(f, pn->unit);
            fputs(")", f);
        }
        fputs("</text>\n", f);
        /* grid and y ticks */
        for (int k = 0; k <= 5; k++) {
            double yv = ymax * k / 5.0;
            double py = y0 + ph - ph * k / 5.0;
            char lab[32];
            fmt_num(lab, sizeof(lab), yv);
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                    LEFT, py, LEFT + pw, py, LEFT - 6, py + 4, lab);
        }
        /* x ticks */
        for (int k = 0; k <= 10; k++) {
            double xv = xmax * k / 10.0;
            double px = LEFT + pw * k / 10.0;
            char lab[32];
            fmt_num(lab, sizeof(lab), xv);
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n"
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                    px, y0 + ph, px, y0 + ph + 5, px, y0 + ph + 18, lab);
        }
        /* axes */
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n"
                "<line x1=\"%d\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n",
                LEFT, y0, LEFT, y0 + ph, LEFT, y0 + ph, LEFT + pw, y0 + ph);
        if (pi == n_panels - 1)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">time (s)</text>\n",
                    LEFT + pw / 2, y0 + ph + 34);
        /* series */
        for (int s = 0; s < pn->n_series; s++) {
            bool open = false;
            for (size_t i = 0; i < n; i++) {
                double yv = pn->y[s][i];
                if (!isfinite(yv) || !isfinite(x[i])) {
                    if (open)
                        fputs("\"/>\n", f);
                    open = false;
                    continue;
                }
                double px = LEFT + pw * x[i] / xmax;
                double py = y0 + ph - ph * yv / ymax;
                if (!open)
                    fprintf(f,
                            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                            "points=\"",
                            colours[s]);
                fprintf(f, "%s%.1f,%.1f", open ? " " : "", px, py);
                open = true;
            }
            if (open)
                fputs("\"/>\n", f);
            /* legend entry */
            double lx = LEFT + pw - 160, ly = y0 + 6 + 16 * s;
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"4\" fill=\"%s\"/>\n"
                    "<text x=\"%.1f\" y=\"%.1f\">",
                    lx, ly, colours[s], lx + 18, ly + 6);
            esc(f, pn->names[s]);
            fputs("</text>\n", f);
        }
        if (pn->n_series == 0 || n == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no data</text>\n",
                    LEFT + pw / 2, y0 + ph / 2.0);
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -EIO : 0;
}
