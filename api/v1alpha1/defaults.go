package v1alpha1

// DefaultReservationImage is the image of the reservation pods the scheduler creates to hold a
// shared GPU for the kubelet (they only sleep): the default of `fairway scheduler
// --reservation-image` and of the chart's scheduler.reservation.image, which test/chart checks
// against this constant.
const DefaultReservationImage = "registry.k8s.io/pause:3.10"
