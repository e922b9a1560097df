package httpapi

import (
	"strconv"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The overview's chart of the last 24 hours' deliveries, drawn here as SVG
// (no script, nothing loaded): one bar an hour, succeeded attempts stacked
// under failed ones, with the figures in a table beside it for screen
// readers and for anyone who wants the numbers.

const (
	chartWidth  = 720
	chartHeight = 160
	chartHours  = 24
)

// deliveryChart is what the template draws.
type deliveryChart struct {
	Width, Height int
	Bars          []chartBar
	Max           int
	Succeeded     int
	Failed        int
}

// chartBar is one hour: its label, its counts and its two rectangles.
type chartBar struct {
	Label             string
	Succeeded, Failed int
	X, W              int
	OkY, OkH          int
	FailY, FailH      int
}

// drawDeliveries buckets the partner's delivery counts of the last 24
// hours (app.DeliveriesByHour) into the chart's hourly bars, succeeded below
// the rest.
func drawDeliveries(now time.Time, counts []app.DeliveryCount) deliveryChart {
	c := deliveryChart{Width: chartWidth, Height: chartHeight, Bars: make([]chartBar, chartHours)}
	start := now.UTC().Truncate(time.Hour).Add(-(chartHours - 1) * time.Hour)
	for i := range c.Bars {
		c.Bars[i].Label = start.Add(time.Duration(i) * time.Hour).Format("15:00")
	}
	for _, n := range counts {
		h := int(n.Hour.Sub(start) / time.Hour)
		if n.Hour.Before(start) || h >= chartHours {
			continue
		}
		if n.Outcome == string(domain.DeliverySucceeded) {
			c.Bars[h].Succeeded += int(n.N)
			c.Succeeded += int(n.N)
		} else {
			c.Bars[h].Failed += int(n.N)
			c.Failed += int(n.N)
		}
	}
	for _, b := range c.Bars {
		c.Max = max(c.Max, b.Succeeded+b.Failed)
	}
	slot := chartWidth / chartHours
	for i := range c.Bars {
		b := &c.Bars[i]
		b.X, b.W = i*slot+2, slot-4
		b.OkH, b.FailH = scale(b.Succeeded, c.Max), scale(b.Failed, c.Max)
		b.OkY = chartHeight - b.OkH
		b.FailY = b.OkY - b.FailH
	}
	return c
}

// scale is n's height in the chart when top is the tallest bar.
func scale(n, top int) int {
	if top == 0 || n == 0 {
		return 0
	}
	return max(1, n*(chartHeight-10)/top)
}

// String summarises the chart in words, its accessible description.
func (c deliveryChart) String() string {
	return strconv.Itoa(c.Succeeded) + " succeeded and " + strconv.Itoa(c.Failed) + " failed delivery attempts in the last 24 hours"
}
